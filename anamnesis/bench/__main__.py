"""``python -m anamnesis.bench``: the benchmark commands without the main CLI."""

from .cli import bench

if __name__ == "__main__":
    bench(prog_name="anamnesis bench")
