"""``ftaudit report``: one self-contained HTML page, checked as text and in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path

from tests.report.chromium import inspect_png, load, screenshot
from tests.support.cli import Invoke, check_exit


def _ids(page: str) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', page))


def test_the_page_is_self_contained(faulty_page: str) -> None:
    page = faulty_page
    assert page.startswith("<!DOCTYPE html>")
    # nothing to fetch: no external script, style sheet, image or font
    assert not re.search(r"""\s(src|href)=["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert page.count("<script>") == 1 and "<script src" not in page


def test_the_timeline_marks_every_kind_of_event(faulty_page: str) -> None:
    page = faulty_page
    ids = _ids(page)
    # attempts of both incarnations, with their fate as a class
    assert 'class="att retried" id="t-i0-s2-a0"' in page
    assert 'class="att committed" id="t-i0-s2-a1"' in page
    assert 'class="att rolled_back" id="t-i0-s4-a0"' in page
    assert 'class="att unfinished" id="t-i0-s5-a0"' in page
    assert 'class="att committed" id="t-i1-s4-a0"' in page
    assert 'class="cell errored faint" id="t-i0-s2-a0-c1"' in page
    assert 'class="crash"' in page  # the crashed cell's cross
    assert {"fault-0", "fault-1", "ck-i0-3", "restore-i1"} <= ids
    assert "cell 1 healed from cell 0 before step 3" in page
    assert "incarnation 1 restored checkpoint 3 (saved by incarnation 0)" in page
    assert "No findings: every rule holds." in page


def test_metric_curves_show_the_abandoned_stretch(faulty_page: str) -> None:
    page = faulty_page
    assert 'id="metric-0"' in page and 'id="metric-1"' in page  # loss, samples
    assert page.count('class="m-abandoned"') >= 1
    assert "abandoned by incarnation 0" in page


def test_every_finding_links_to_an_element_of_the_timeline(lossy_page: str) -> None:
    ids = _ids(lossy_page)
    links = re.findall(r'<li id="(v-\d+)">.*?data-target="([^"]+)"', lossy_page)
    assert [v for v, _ in links] == ["v-1", "v-2"]
    assert [t for _, t in links] == ["t-i1-s6-a0-c1", "t-i1-s7-a0-c1"]
    for _, target in links:
        assert target in ids
    # the element pointed at is framed in red and leads back to its finding
    assert 'id="t-i1-s6-a0-c1" x=' in lossy_page
    assert 'data-finding="v-1"' in lossy_page
    assert 'class="bad-mark"' in lossy_page


def test_coverage_highlights_the_step_with_the_lost_sample(lossy_page: str) -> None:
    block = lossy_page.split('id="cov-s6"')[1].split("</g>")[0]
    assert "1 missing, 0 extra" in block and 'class="cov-missing"' in block
    assert 'class="cov-band"' in lossy_page
    assert "6 of 8 steps exact" in lossy_page


def test_report_command_writes_the_page_and_exits_like_ft_verify(
    ftaudit: Invoke, faulty_run: Path, lossy_run: Path, tmp_path: Path
) -> None:
    good = tmp_path / "good.html"
    result = ftaudit("report", faulty_run, "-o", good)
    check_exit(result, 0)
    assert good.read_text().startswith("<!DOCTYPE html>") and result.stdout == ""
    assert "verified" in result.stderr
    bad = tmp_path / "bad.html"
    result = ftaudit("report", lossy_run, "-o", bad)
    check_exit(result, 1)
    assert "FT004" in bad.read_text()
    result = ftaudit("report", tmp_path / "missing", "-o", tmp_path / "x.html")
    check_exit(result, 2)
    assert not (tmp_path / "x.html").exists()
    result = ftaudit("report", faulty_run, "-o", tmp_path / "no" / "dir" / "x.html")
    check_exit(result, 2)


def test_the_page_runs_in_chromium_and_highlights_a_finding(
    lossy_page: str, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    page.write_text(lossy_page)
    # opened at a finding's target, as its "show on timeline" link does
    loaded = load(page, tmp_path, fragment="t-i1-s6-a0-c1")
    assert 'data-report-ready="1"' in loaded.dom, "the page's script did not run"
    assert loaded.console == [], loaded.console
    assert "Uncaught" not in loaded.stderr
    assert 'id="timeline-svg"' in loaded.dom and 'id="v-1"' in loaded.dom
    assert re.search(r'class="[^"]*flash[^"]*" id="t-i1-s6-a0-c1"', loaded.dom), "not highlighted"


def test_the_screenshot_shows_the_timeline(faulty_page: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(faulty_page)
    png = tmp_path / "report.png"
    shot = screenshot(page, png, tmp_path, size=(1400, 1000))
    assert shot.console == [], shot.console
    info = inspect_png(png)
    assert (info.width, info.height) == (1400, 1000)
    # a blank page of the same size measures as blank: the measure tells them apart
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    screenshot(blank, tmp_path / "blank.png", tmp_path, size=(1400, 1000))
    assert inspect_png(tmp_path / "blank.png").busy_rows < 0.01
    assert info.busy_rows > 0.2, info
