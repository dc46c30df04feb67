"""Headless Chromium for the report tests: load a page, collect its console, screenshot it.

Debian's ``chromium`` (``scripts/install_chromium.sh``) runs with its own throwaway
profile, no network services, no GPU. Console messages reach stderr through
``--enable-logging=stderr``; a page's uncaught errors show there as ``Uncaught ...``.
"""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--hide-scrollbars",
)
TIMEOUT_S = 90
CONSOLE = re.compile(r":INFO:CONSOLE[^\]]*\] (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class Page:
    dom: str
    console: list[str]
    """Every console message the page produced (errors, warnings and logs)."""
    stderr: str


def require_chromium() -> Path:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/install_chromium.sh (as root) first")
    return CHROMIUM


def _run(args: list[str], profile: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(require_chromium()), *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=cwd,
        check=False,
    )


def load(page: Path, tmp: Path, fragment: str = "") -> Page:
    """The DOM after the page's scripts ran (opened at ``#fragment``), and its console."""
    uri = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    proc = _run(["--dump-dom", uri], tmp / "profile-dom", tmp)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return Page(proc.stdout, CONSOLE.findall(proc.stderr), proc.stderr)


def screenshot(page: Path, png: Path, tmp: Path, size: tuple[int, int] = (1400, 1000)) -> Page:
    proc = _run(
        [f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", page.resolve().as_uri()],
        tmp / "profile-shot",
        tmp,
    )
    assert proc.returncode == 0 and png.exists(), proc.stderr[-4000:]
    return Page("", CONSOLE.findall(proc.stderr), proc.stderr)


@dataclass(frozen=True)
class PngInfo:
    width: int
    height: int
    busy_rows: float
    """Fraction of scanlines whose filtered bytes are not all zero after the first pixel:
    a blank (single-colour) image has none, a page with content has many."""


def inspect_png(path: Path) -> PngInfo:
    """Check a PNG's structure (signature, chunk CRCs, image data size) and measure it."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
        if kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and interlace == 0, (depth, interlace)
    channels = {2: 3, 6: 4, 0: 1, 4: 2}[color]
    raw = zlib.decompress(idat)
    stride = 1 + width * channels
    assert len(raw) == stride * height, "image data does not match the header"
    busy = 0
    for row in range(height):
        line = raw[row * stride + 1 + channels : (row + 1) * stride]
        busy += line.count(0) != len(line)
    return PngInfo(width, height, busy / height)
