"""Screenshots of a release report in a real browser (headless Chromium, Debian package ``chromium``), to look at
what a reader sees: the first screen, then the whole page cut into screen-high parts, and the printed version
as PDF.

    python benchmarks/report_screenshots.py OUT_DIR [--report REPORT.html] [--width 1280] [--height 1400]

Without ``--report`` it runs the bundled demo release (``sdc demo``, a temporary Prefect server) into
OUT_DIR/demo and shoots its report.html. Writes OUT_DIR/report-first-screen.png, OUT_DIR/report-part-N.png and
OUT_DIR/report-print.pdf.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from PIL import Image

TALL = 16000  # Chromium's largest screenshot height; a longer page is cut off at the bottom


def chromium() -> str:
    """The Chromium executable on PATH."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    sys.exit("no chromium on PATH: apt-get install chromium")


def shoot(report: Path, png: Path, width: int, height: int) -> None:
    """One screenshot of ``report`` in a window of width x height."""
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={png}", f"--window-size={width},{height}", report.resolve().as_uri()],
                   check=True, capture_output=True)


def print_pdf(report: Path, pdf: Path) -> None:
    """The report as Chromium prints it (the page's print style)."""
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", report.resolve().as_uri()], check=True, capture_output=True)


def content_height(png: Path) -> int:
    """The height of the page's content in a tall screenshot: the last row holding anything but the white page
    or the black Chromium leaves unpainted."""
    image = Image.open(png).convert("L")
    width, height = image.size
    pixels = image.load()
    for y in range(height - 1, 0, -1):
        if any(pixels[x, y] not in (0, 255) for x in range(0, width, 3)):
            return y + 1
    return height


def parts(tall: Path, out_dir: Path, height: int) -> list[Path]:
    """The tall screenshot cut into screen-high parts report-part-N.png."""
    image = Image.open(tall)
    bottom = content_height(tall) + 20
    paths = []
    for i, top in enumerate(range(0, bottom, height), start=1):
        path = out_dir / f"report-part-{i}.png"
        image.crop((0, top, image.size[0], min(top + height, bottom))).save(path)
        paths.append(path)
    return paths


def demo_report(out_dir: Path) -> Path:
    """Run the demo release into out_dir/demo; return its report.html."""
    target = out_dir / "demo"
    subprocess.run([sys.executable, "-m", "sdc_tasks.cli", "demo", "--out", str(target)], check=True)
    return target / "report.html"


def main() -> None:
    """Parse the arguments, produce the report when none is given, and take the screenshots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--report", type=Path, default=None)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1400)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    report = args.report or demo_report(args.out_dir)
    shoot(report, args.out_dir / "report-first-screen.png", args.width, args.height)
    tall = args.out_dir / "report-tall.png"
    shoot(report, tall, args.width, TALL)
    written = parts(tall, args.out_dir, args.height)
    tall.unlink()
    print_pdf(report, args.out_dir / "report-print.pdf")
    print(f"{len(written) + 1} screenshots and report-print.pdf in {args.out_dir}")


if __name__ == "__main__":
    main()
