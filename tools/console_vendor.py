"""Fetch the web console's third-party files from the npm registry, by exact version and hash, into the package.

    python tools/console_vendor.py           write them into src/statewright/console/static/vendor/
    python tools/console_vendor.py --check   say whether the committed files are what the registry's package holds

The files are committed, so neither a user nor the server ever reaches the network for them; this script is how
they were made and how a new version is taken (change ``PACKAGES``, run it, commit the result). Each tarball is
checked against the registry's sha512 integrity before anything is read from it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import sys
import tarfile
import urllib.request
from pathlib import Path

VENDOR = Path(__file__).resolve().parent.parent / "src" / "statewright" / "console" / "static" / "vendor"
# name, version, the registry's dist.integrity, {file in the tarball: file written}
PACKAGES = [
    ("@dagrejs/dagre", "3.1.4",
     "sha512-tW3fsvXxSteGpBHgT/hqPxBxTibPw409mH97S6LzXe+ddak2/RtPtYkYPo5gfvzBtnjxrZnoh8ft62zA3LDAZQ==",
     {"package/dist/dagre.esm.js": "dagre-3.1.4.esm.js", "package/LICENSE": "dagre-LICENSE.txt"}),
]


def fetch(name: str, version: str, integrity: str) -> bytes:
    url = f"https://registry.npmjs.org/{name}/-/{name.rsplit('/', 1)[-1]}-{version}.tgz"
    with urllib.request.urlopen(url, timeout=60) as response:
        tarball = response.read()
    algorithm, _, expected = integrity.partition("-")
    if base64.b64encode(hashlib.new(algorithm, tarball).digest()).decode() != expected:
        raise SystemExit(f"{name}@{version}: the tarball from {url} does not match its pinned {algorithm}")
    return tarball


def contents(tarball: bytes, member: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        extracted = archive.extractfile(member)
        if extracted is None:
            raise SystemExit(f"{member} is not a file in the package")
        data = extracted.read()
    # A source map is not shipped: the line naming it would only make browsers ask for it.
    return b"".join(line for line in data.splitlines(keepends=True) if not line.startswith(b"//# sourceMappingURL="))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files; write nothing")
    args = parser.parse_args()
    differ = []
    for name, version, integrity, files in PACKAGES:
        tarball = fetch(name, version, integrity)
        for member, written in files.items():
            data = contents(tarball, member)
            target = VENDOR / written
            if args.check:
                if not target.exists() or target.read_bytes() != data:
                    differ.append(str(target))
            else:
                target.write_bytes(data)
                print(f"{name}@{version}: {member} -> {target}")
    if differ:
        print("differ from the registry's package: " + ", ".join(differ), file=sys.stderr)
        return 1
    if args.check:
        print("the committed files are the registry's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
