"""CI's check of the local-model smoke sweep (issue 47): every job FINISHED, tagged
``ragbench.cost_basis=local``, and every case answered by the local model (a non-empty answer, no error,
completion tokens); ``--cached`` (the rerun): no generation request sent (every reply from the caches).

    python .ci/local_smoke_check.py SWEEP_DIR [--cached]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ragbench.record import RUN_FILE, STORED_FILE
from ragbench.tracking.mlflow_sink import output_files


def main(argv: list[str]) -> int:
    root, cached = Path(argv[0]), "--cached" in argv[1:]
    # a job's record folder keeps run.json + cases.jsonl, or (once they are in the artifact store) a pointer
    # to them, stored.json: read both ways through ragbench's one reader
    folders = sorted({p.parent for name in (RUN_FILE, STORED_FILE) for p in root.rglob(name)})
    problems: list[str] = []
    if not folders:
        problems.append(f"no record ({RUN_FILE} or {STORED_FILE}) under {root}")
    for where in folders:
        files = output_files(where)
        run = json.loads(files[RUN_FILE])
        if run.get("status") != "FINISHED":
            problems.append(f"{where}: status {run.get('status')}: {run.get('error')}")
        if run.get("tags", {}).get("ragbench.cost_basis") != "local":
            problems.append(f"{where}: not tagged ragbench.cost_basis=local")
        calls = run.get("metrics", {}).get("llm/generation_calls")
        if cached and calls != 0:
            problems.append(f"{where}: the rerun sent {calls} generation requests, not 0")
        lines = [json.loads(x) for x in files.get("cases.jsonl", b"").decode().splitlines() if x.strip()]
        for case in lines:
            answered = case.get("status") == "ok" and (case.get("answer") or "").strip()
            if not answered or case.get("error"):
                problems.append(
                    f"{where}: case {case.get('qid')} not answered: {case.get('status')} {case.get('error')}"
                )
            elif not cached and not case.get("completion_tokens"):
                problems.append(f"{where}: case {case.get('qid')} has no completion tokens")
        print(
            f"{where}: {len(lines)} cases answered by the local model, "
            f"llm/generation_calls={calls}, answer/f1={run.get('metrics', {}).get('answer/f1')}"
        )
    for problem in problems:
        print(f"local smoke: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
