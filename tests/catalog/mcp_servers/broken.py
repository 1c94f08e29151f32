"""Servers that break the protocol below the SDK (no SDK server can be made to):

python broken.py silent     # reads every request, never answers
python broken.py junk       # answers every line with text that is not JSON-RPC
python broken.py oldversion # completes initialize with protocol version 2023-01-01
python broken.py deep       # lists a tool whose input schema nests 300 levels deep
python broken.py fat        # a 1 MB serverInfo name and 3 MB of capabilities, 3 tools
python broken.py flood      # writes 64 MiB to stderr, then what its stderr is; never answers
python broken.py wrongid    # gives every result id 999, a request it was never sent
python broken.py needskey   # exits before answering when EXAMPLE_API_KEY is not in its
                            # environment, saying so on stderr (as the reference servers
                            # server-brave-search, -slack, -gitlab, -google-maps do)
python broken.py hugeline MB PIDFILE  # writes its pid, answers initialize with one line of
                            # MB mebibytes (no newline until the end), then sleeps
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time

MODE = sys.argv[1]

if MODE == "flood":
    # Would a flood of stderr land on the host's disk? Say what the catalog gave as stderr.
    kind = "pipe" if stat.S_ISFIFO(os.fstat(2).st_mode) else "file"
    for _ in range(64):
        os.write(2, b"e" * (1024 * 1024))
    os.write(2, f"\nmy stderr is a {kind}\n".encode())
    time.sleep(3600)

if MODE == "needskey" and not os.environ.get("EXAMPLE_API_KEY"):
    sys.stderr.write("Error: EXAMPLE_API_KEY environment variable is required\n")
    sys.exit(1)

if MODE == "hugeline":
    # One stdout line far over any answer's bound: would the client read it whole (the SDK's
    # reader joins it chunk by chunk, quadratic), and does the server outlive the refusal?
    with open(sys.argv[3], "w") as pidfile:
        pidfile.write(str(os.getpid()))
    first = json.loads(sys.stdin.readline())
    head = (
        '{"jsonrpc": "2.0", "id": ' + json.dumps(first["id"]) + ', "result": '
        '{"protocolVersion": "2025-06-18", "capabilities": {}, '
        '"serverInfo": {"version": "1", "name": "'
    )
    os.write(1, head.encode())
    for _ in range(int(sys.argv[2])):
        os.write(1, b"n" * (1024 * 1024))
    os.write(1, b'"}}}\n')
    time.sleep(3600)


def reply(message_id: object, result: object = None, error: object = None) -> None:
    body = {"jsonrpc": "2.0", "id": message_id}
    body.update({"error": error} if error is not None else {"result": result})
    print(json.dumps(body), flush=True)


for line in sys.stdin:
    if MODE == "silent":
        continue
    if MODE == "junk":
        print("Starting tool server... ready!", flush=True)
        continue
    message = json.loads(line)
    if "id" not in message:
        continue
    if MODE == "wrongid" and message.get("method") == "initialize":
        message["id"] = 999
    if MODE == "fat" and message.get("method") == "initialize":
        reply(
            message["id"],
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}, "experimental": {"x": {"blob": "b" * 3_000_000}}},
                "serverInfo": {"name": "n" * 1_000_000, "version": "1.0"},
            },
        )
    elif MODE == "fat" and message.get("method") == "tools/list":
        listed = [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(3)]
        reply(message["id"], {"tools": listed})
    elif MODE == "deep" and message.get("method") == "initialize":
        reply(
            message["id"],
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "deep-server", "version": "0.0.1"},
            },
        )
    elif MODE == "deep" and message.get("method") == "tools/list":
        schema: dict = {"type": "object"}
        for _ in range(150):
            schema = {"type": "object", "properties": {"a": schema}}
        reply(message["id"], {"tools": [{"name": "deep", "inputSchema": schema}]})
    elif message.get("method") == "initialize":
        reply(
            message["id"],
            {
                "protocolVersion": "2023-01-01",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "old-server", "version": "0.0.1"},
            },
        )
    else:
        reply(message["id"], error={"code": -32601, "message": "Method not found"})
if MODE == "silent":
    time.sleep(3600)
