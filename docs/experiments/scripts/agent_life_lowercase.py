"""Write the agent-life personas with every note lowercased, for a robustness run.

    python docs/experiments/scripts/agent_life_lowercase.py OUT_FOLDER
    anamnesis bench agent-life --data OUT_FOLDER --config fast,default --out OUT.json

Only the notes change; questions, times and gold stay as written.
"""

import json
import sys
from pathlib import Path

from anamnesis.bench.agent_life import PERSONAS

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for path in sorted(PERSONAS.glob("*.json")):
    persona = json.loads(path.read_text(encoding="utf-8"))
    for item in persona["items"]:
        item["content"] = item["content"].lower()
    (out / path.name).write_text(
        json.dumps(persona, ensure_ascii=False, indent=1), encoding="utf-8"
    )
