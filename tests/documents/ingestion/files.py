"""Small real files of every format, made in the tests (no binary fixtures to trust or update).

PDFs are written by hand, object by object, with text in the standard Helvetica font, which is
what pypdf reads back; DOCX files by python-docx; archives by zipfile.
"""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib

import docx
from docx.shared import Pt
from pypdf import PdfReader, PdfWriter


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """A PDF with one page per item, each line of text drawn in Helvetica; an empty page has no text at all."""
    objects: list[bytes] = []
    page_ids = [4 + 2 * i for i in range(len(pages))]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for lines in pages:
        if lines:
            ops = ["BT /F1 12 Tf 14 TL 72 720 Td"] + [f"({_pdf_escape(line)}) Tj T*" for line in lines] + ["ET"]
        else:
            ops = ["0.5 g 72 72 400 600 re f"]  # a grey box: what a scanned page looks like to a text extractor
        stream = "\n".join(ops).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {len(objects) + 2} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    info = None
    if title:
        objects.append(f"<< /Title ({_pdf_escape(title)}) >>".encode())
        info = len(objects)
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(f"{number} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode())
    for offset in offsets:
        out.write(f"{offset:010d} 00000 n \n".encode())
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R" + (f" /Info {info} 0 R" if info else "") + " >>"
    out.write(f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def encrypt_pdf(data: bytes, password: str = "secret") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx() -> bytes:
    document = docx.Document()
    document.core_properties.title = "Deployment runbook"
    document.add_heading("Deployment runbook", level=1)
    document.add_paragraph("Deploys go out every Tuesday after the freeze lifts.")
    document.add_heading("Rolling back", level=2)
    document.add_paragraph("Check the dashboard first.", style="List Bullet")
    document.add_paragraph("Page the on-call engineer.", style="List Bullet")
    for line in ("./deploy rollback --env production", "./deploy status"):
        run = document.add_paragraph().add_run(line)
        run.font.name, run.font.size = "Courier New", Pt(10)
    table = document.add_table(rows=3, cols=2)
    for row, (service, owner) in zip(table.rows, [("Service", "Owner"), ("api", "Platform"), ("web", "Frontend | UI")]):
        row.cells[0].text, row.cells[1].text = service, owner
    document.add_paragraph("That is all.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


HTML = """<!DOCTYPE html>
<html><head><title>Incident handbook</title><style>body { color: red }</style>
<script>alert("tracking")</script></head>
<body><nav><a href="/">Home</a> | <a href="/about">About us</a></nav>
<main><h1>Incident handbook</h1><p>Declare an incident when customers are affected.</p>
<h2>Severity levels</h2>
<table><tr><th>Level</th><th>Meaning</th></tr><tr><td>SEV1</td><td>Outage</td></tr><tr><td>SEV2</td><td>Degraded</td></tr></table>
<pre><code>incident declare --sev 1</code></pre>
<script>document.write("injected")</script>
</main><footer>Copyright Acme</footer></body></html>
"""

MARKDOWN = """# Onboarding

Welcome to the team.

## Accounts

| System | Who grants it |
| --- | --- |
| GitHub | Platform |

```python
print("hello")
```
"""


def make_zip(entries: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as archive:
        for name, data in entries.items():
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=compression)
    return out.getvalue()


def make_zip_with_symlink(name: str, target: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        info = zipfile.ZipInfo(name)
        info.external_attr = (0o120777 << 16) | 0  # S_IFLNK
        archive.writestr(info, target)
    return out.getvalue()


def make_zip_with_encrypted_entry(name: str, data: bytes) -> bytes:
    """An archive whose entry carries the "encrypted" flag, as a password-protected archive's do (zipfile writes none)."""
    archive = bytearray(make_zip({name: data}, compression=zipfile.ZIP_STORED))
    local, central = archive.find(b"PK\x03\x04"), archive.find(b"PK\x01\x02")
    archive[local + 6] |= 0x1
    archive[central + 8] |= 0x1
    return bytes(archive)


def make_yaml_bomb(levels: int = 10) -> bytes:
    """A Markdown file of a few hundred bytes whose front-matter title is 9**levels strings, by YAML aliases."""
    names = [chr(ord("a") + n) for n in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [{', '.join(['lol'] * 9)}]"]
    lines += [f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]" for previous, name in zip(names, names[1:])]
    return ("---\n" + "\n".join(lines) + f"\ntitle: *{names[-1]}\n---\n# Laughs\n").encode()


def make_docx_bomb(*, size: int = 0, expanded: int = 2**32 - 1) -> bytes:
    """A DOCX (padded to `size` bytes) whose word/document.xml inflates to about `expanded` bytes of paragraphs.

    Built in milliseconds: deflate output after a full flush depends on nothing before it, so one
    compressed megabyte of paragraphs is repeated as it is. The rest is a real document's parts and
    an incompressible image up to `size`. The part's CRC is left wrong, as a bomb's may be: a reader
    learns it only after inflating everything.
    """
    head = b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document ' + _WORD_NS + b"><w:body>"
    tail = b"</w:body></w:document>"
    paragraph = b"<w:p><w:r><w:t>All work and no play makes a bomb.</w:t></w:r></w:p>"
    block = paragraph * (1024 * 1024 // len(paragraph))
    copies = (expanded - len(head) - len(tail)) // len(block)

    def deflate(data: bytes, mode: int) -> bytes:
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate, as ZIP stores it
        return compressor.compress(data) + compressor.flush(mode)

    stream = deflate(head, zlib.Z_FULL_FLUSH) + deflate(block, zlib.Z_FULL_FLUSH) * copies + deflate(tail, zlib.Z_FINISH)
    parts = {n: d for n, d in _zip_parts(make_docx()).items() if n != "word/document.xml"}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo("word/document.xml"), stream)  # stored as is, declared deflated below
        for name, data in parts.items():
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=zipfile.ZIP_DEFLATED)
        padding = size - out.tell() - 2048
        if padding > 0:
            archive.writestr(zipfile.ZipInfo("word/media/image1.png"), random.Random(1).randbytes(padding))
    bomb = bytearray(out.getvalue())
    declared = len(head) + len(block) * copies + len(tail)
    # The first entry's local header (at 0) and central-directory record (where the end record points).
    central = struct.unpack("<I", bomb[-6:-2])[0]
    for offset, method_at, size_at in ((0, 8, 22), (central, 10, 24)):
        struct.pack_into("<H", bomb, offset + method_at, zipfile.ZIP_DEFLATED)
        struct.pack_into("<I", bomb, offset + size_at, declared)
    return bytes(bomb)


_WORD_NS = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def _zip_parts(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def make_ratio_bomb_archive(entries: int = 10) -> bytes:
    """A ZIP of about 10 KB whose entries each inflate to just under 1 MB: each below the old 1 MB floor of the ratio check."""
    return make_zip({f"part-{n}.txt": b"0" * (1024 * 1024 - 1) for n in range(entries)})
