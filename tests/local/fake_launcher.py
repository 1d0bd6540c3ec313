"""A stand-in for llama.cpp behind the real launcher: a tiny HTTP server with /health, /v1/models
and /props, so that EmbeddedServer's lifecycle is tested without a model.

``FAKE_LLAMA`` picks the behaviour: ``ok`` (default), ``fail`` (llama.cpp refuses to start),
``hang`` (never becomes ready), ``sick`` (listens, but /health answers 503).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from toolshim.local.launcher import main

QWEN_CAPS = {"supports_tools": True, "supports_parallel_tool_calls": True}


class FakeLlama:
    def __init__(self, args: argparse.Namespace) -> None:
        mode = os.environ.get("FAKE_LLAMA", "ok")
        if mode == "fail":
            print("0.00.004.209 E cmn  common_init_: failed to load model 'x.gguf'", flush=True)
            raise RuntimeError("Failed to init server, please check the input params.")
        if mode == "hang":
            time.sleep(3600)
        alias = args.alias
        props: dict[str, Any] = {
            "chat_template": "{{ messages }}" if args.jinja else "",
            "chat_template_caps": QWEN_CAPS,
            "model_alias": alias,
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            # where llama-server reports the defaults a request without its own gets
            "default_generation_settings": {"params": {"temperature": args.temperature}},
        }

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body: dict[str, Any]
                if self.path == "/health":
                    status, body = (
                        (503, {"error": "loading"}) if mode == "sick" else (200, {"status": "ok"})
                    )
                elif self.path == "/v1/models":
                    status, body = 200, {"object": "list", "data": [{"id": alias}]}
                elif self.path == "/props":
                    status, body = 200, props
                else:
                    status, body = 404, {"error": {"message": "not found"}}
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((args.host, args.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.listening_address = f"http://{args.host}:{self.httpd.server_address[1]}"


if __name__ == "__main__":
    sys.exit(main(server_factory=FakeLlama))
