#!/usr/bin/env python3
"""A real SMTP server for the notification tests (aiosmtpd, installed by scripts/test-deps.sh).

Binds 127.0.0.1:PORT, writes one JSON line per accepted message to LOG (Message-ID,
envelope sender and recipients, subject, the text part, the List-Unsubscribe headers),
flushed before the reply, and prints "ready" once it listens, then "accepted" on stdout for each
message once its line is written (what the tests wait on, instead of polling the log). Also the local server of
scripts/notify-bench.sh.

--light: log only the Message-ID and the recipients (no MIME parse), for the benchmark.
--hang-until FILE: after a message is logged, its "250" reply waits until FILE exists
(the kill test lands its SIGKILL between the server's acceptance and the client's ack).
--hold-until FILE: each message's session is held open at the end of its DATA, before it is
logged, printing "held" on stdout, until FILE exists; a message held so is then refused
(451) and never logged: the session of a client killed meanwhile (the kill tests land their
SIGKILL while sessions are open, on this cue) delivered nothing.
"""

import argparse
import asyncio
import email
import email.policy
import json
import os
import re
import sys
import time

from aiosmtpd.controller import Controller

MESSAGE_ID = re.compile(rb"(?im)^Message-ID:\s*(<[^>\r\n]*>)")


class Handler:
    def __init__(self, log, hang_until, light=False, hold_until=None):
        self.log = log
        self.hang_until = hang_until
        self.light = light
        self.hold_until = hold_until

    async def handle_DATA(self, server, session, envelope):
        if self.hold_until and not os.path.exists(self.hold_until):
            print("held", flush=True)
            while not os.path.exists(self.hold_until):
                await asyncio.sleep(0.05)
            return "451 Held and dropped"
        if self.light:
            # The benchmark's mode: the Message-ID and recipients only, no MIME parse (the
            # parse costs more than everything dropslot does per message).
            raw = envelope.original_content or envelope.content
            found = MESSAGE_ID.search(raw)
            record = {"message_id": found.group(1).decode() if found else "", "rcpt_tos": list(envelope.rcpt_tos)}
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            print("accepted", flush=True)
            return "250 Message accepted for delivery"
        msg = email.message_from_bytes(envelope.original_content or envelope.content, policy=email.policy.default)
        text = ""
        html = ""
        for part in msg.walk():
            if part.get_content_type() == "text/plain" and not text:
                text = part.get_content()
            elif part.get_content_type() == "text/html" and not html:
                html = part.get_content()
        record = {
            "message_id": str(msg.get("Message-ID", "")),
            "mail_from": envelope.mail_from,
            "rcpt_tos": list(envelope.rcpt_tos),
            "from": str(msg.get("From", "")),
            "to": str(msg.get("To", "")),
            "subject": str(msg.get("Subject", "")),
            "text": text,
            "html": html,
            "list_unsubscribe": str(msg.get("List-Unsubscribe", "")),
            "list_unsubscribe_post": str(msg.get("List-Unsubscribe-Post", "")),
        }
        with open(self.log, "a", encoding="utf-8") as f:
            # Flushed before the reply: a reader sees the line once the client could have the 250
            # (the service under test is what gets killed, never this server).
            f.write(json.dumps(record) + "\n")
            f.flush()
        print("accepted", flush=True)
        if self.hang_until:
            while not os.path.exists(self.hang_until):
                await asyncio.sleep(0.05)
        return "250 Message accepted for delivery"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--hang-until", default=None)
    p.add_argument("--hold-until", default=None)
    p.add_argument("--light", action="store_true", help="log the Message-ID and recipients only (benchmarks)")
    a = p.parse_args()
    controller = Controller(Handler(a.log, a.hang_until, a.light, a.hold_until), hostname="127.0.0.1", port=a.port)
    controller.start()
    print("ready", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    sys.exit(main())
