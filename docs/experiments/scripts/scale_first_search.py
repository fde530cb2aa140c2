"""First search after opening a grown scale store, each run in a fresh process (issue 34,
study "A memory for a lifetime": open fast).

    python docs/experiments/scripts/scale_first_search.py STORE.db [--config fast,default]
        [--runs 3] [--profile] [--wait] [--code DIR --code DIR ...]

Each run starts a new interpreter, loads the `edge` embedder (and runs it once) before
the clock, then times `Memory(path)` (warm-up thread on, as by default), the first
`search` (query embedding included) and a second one, and reads VmHWM / VmRSS.
`--wait` also times until the background warm-up ends and reports the RSS then.
`--profile` prints a cProfile (cumulative) of open + first search instead.
`--code` runs each child with that checkout first on PYTHONPATH (several: interleaved
run by run, to compare code versions on one store under the same load).
"""
import argparse, json, os, subprocess, sys

CHILD = r"""
import json, sys, time, threading
from anamnesis.embed import get_embedder
from anamnesis.memory import Memory
from anamnesis.bench.presets import BENCH_PRESETS
path, config, query, profile, wait = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == '1', sys.argv[5] == '1'
emb = get_embedder('edge'); emb.embed_query('warm up')
def status(key):
    for line in open('/proc/self/status'):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
if profile:
    import cProfile, pstats
    pr = cProfile.Profile(); pr.enable()
t0 = time.perf_counter()
m = Memory(path=path, embedder=emb, config=BENCH_PRESETS[config])
opened = time.perf_counter() - t0
t = time.perf_counter(); hits = m.search(query, user_id='scale', limit=10)
first = time.perf_counter() - t
if profile:
    pr.disable()
    pstats.Stats(pr).sort_stats('cumulative').print_stats(40)
t = time.perf_counter(); m.search(query, user_id='scale', limit=10)
second = time.perf_counter() - t
import anamnesis
out = {'code': anamnesis.__file__, 'open_ms': opened * 1000, 'first_search_ms': first * 1000,
       'open_plus_first_ms': (opened + first) * 1000, 'second_search_ms': second * 1000,
       'hits': len(hits), 'rss_after_first': status('VmRSS')}
if wait and m._warm_thread is not None:
    m._warm_thread.join()
    out['warm_done_s'] = time.perf_counter() - t0
    t = time.perf_counter(); m.search(query + ' again', user_id='scale', limit=10)
    out['warm_search_ms'] = (time.perf_counter() - t) * 1000
out['rss_end'] = status('VmRSS'); out['hwm'] = status('VmHWM')
m.close()
out['close_s'] = time.perf_counter() - t0
print(json.dumps(out))
"""

QUERIES = [
    "What was the name of the restaurant I went to for my anniversary?",
    "How many hours did I spend practising guitar last week?",
    "Which city did my sister move to?",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("--config", default="fast,default")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--code", action="append", default=[])
    args = parser.parse_args()
    for config in args.config.split(","):
        for run in range(args.runs):
            for code in args.code or [None]:
                measure(args, config, run, code)


def measure(args: argparse.Namespace, config: str, run: int, code: str | None) -> None:
    """One fresh process on ``args.store``, from checkout ``code`` (None: this one)."""
    env = dict(os.environ)
    if code:
        env["PYTHONPATH"] = code
    done = subprocess.run(
        [sys.executable, "-c", CHILD, args.store, config, QUERIES[run % len(QUERIES)],
         "1" if args.profile else "0", "1" if args.wait else "0"],
        capture_output=True, text=True, check=False, env=env, cwd=code or None,
    )
    if done.returncode:
        print(done.stderr[-3000:])
        return
    if args.profile:
        print(done.stdout)
        return
    row = json.loads(done.stdout.strip().splitlines()[-1])
    sizes = ("rss_after_first", "rss_end", "hwm")
    mb = {k + "_mb": round(v / 2**20) for k, v in row.items() if k in sizes}
    ms = {k: v if isinstance(v, str) else round(v, 1) for k, v in row.items() if k not in sizes}
    print(json.dumps({"config": config, "run": run, **ms, **mb}), flush=True)

if __name__ == "__main__":
    main()
