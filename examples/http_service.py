"""A tiny standard-library HTTP service around ``examples/my_rag.answer`` (``system=http``):

    python examples/http_service.py --port 8765 &
    python -m ragbench dataset=qasper system=http system.url=http://127.0.0.1:8765/answer

Each request is ``POST {qid, question, params, contexts?}``; the reply is the JSON record.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere: `examples` importable
from examples.my_rag import answer  # noqa: E402


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
        try:
            ask = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            kwargs = dict(ask.get("params") or {})
            if "contexts" in ask:
                kwargs["contexts"] = ask["contexts"]
            body, status = {"qid": ask["qid"], **answer(ask["question"], **kwargs)}, 200
        except Exception as exc:  # noqa: BLE001 - the client gets a 500 with the reason
            body, status = {"error": f"{type(exc).__name__}: {exc}"}, 500
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet: one line per request is noise
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"serving my_rag on http://{args.host}:{args.port}/answer", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
