#!/usr/bin/env python3
"""A real SMTP server for the tests (aiosmtpd): each accepted message is written to FOLDER as
NNNN.eml (written under a temporary name, then renamed, so a reader never sees half a mail).
Recipients whose local part is `refuse` are refused with 550, so tests can see a failing send.
Prints the port it listens on (127.0.0.1, chosen by the system) on the first line of stdout.

Usage: smtp_sink.py FOLDER
"""

import asyncio
import itertools
import os
import sys

from aiosmtpd.smtp import SMTP


class Sink:
    def __init__(self, folder):
        self.folder = folder
        self.counter = itertools.count(1)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.split("@", 1)[0].lower() == "refuse":
            return "550 5.1.1 <%s>: mailbox unavailable" % address
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        number = next(self.counter)
        final = os.path.join(self.folder, "%04d.eml" % number)
        temporary = os.path.join(self.folder, ".%04d.tmp" % number)
        with open(temporary, "wb") as out:
            out.write(("X-Envelope-To: %s\r\n" % ", ".join(envelope.rcpt_tos)).encode())
            out.write(envelope.original_content or envelope.content)
        os.rename(temporary, final)
        return "250 Message accepted for delivery"


def main():
    folder = sys.argv[1]
    os.makedirs(folder, exist_ok=True)
    loop = asyncio.new_event_loop()
    handler = Sink(folder)
    server = loop.run_until_complete(loop.create_server(lambda: SMTP(handler), "127.0.0.1", 0))
    print(server.sockets[0].getsockname()[1], flush=True)
    loop.run_forever()


if __name__ == "__main__":
    main()
