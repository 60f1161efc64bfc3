"""The submit form's expected starts in Chromium against daphne and the sandbox's scheduler.

The table follows the form: a change (fewer GPUs) is answered with the new options; a
burst of typing (a time limit typed key by key) asks once it settles, not per keystroke;
an alternative is taken with a click, which changes the form's field. How long the table
took to follow the change is printed (`-s`), not asserted: the machine may be busy.
"""

import pytest

from clusters.models import Cluster
from tests.helpers import browser_log_in, screenshot

pytestmark = [pytest.mark.sandbox, pytest.mark.browser]

# Records when #starts-rows last changed, in the page's own clock.
WATCH = """() => {
  window.startsChanged = 0;
  new MutationObserver(() => { window.startsChanged = performance.now(); })
    .observe(document.getElementById('starts-rows'), {childList: true, subtree: true});
}"""


def _labels(page) -> list[str]:
    return page.locator("#starts-rows tr td:first-child").all_inner_texts()


def test_the_form_shows_expected_starts_that_follow_its_fields(
    asgi_server, researcher, project, sandbox_cluster: Cluster, page
) -> None:
    asks: list[str] = []
    page.on("request", lambda r: asks.append(r.url) if "/jobs/new/starts/" in r.url else None)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_log_in(page, asgi_server, researcher)
    page.goto(f"{asgi_server}/jobs/new/")
    page.locator("#id_partition option", has_text="gpu").first.wait_for(state="attached")
    page.locator("#id_name").fill("resnet")
    page.locator("#id_command").fill("python train.py")
    page.locator("#id_gpus_per_node").fill("2")
    page.locator("#id_time_limit").fill("0:40:00")
    rows = page.locator("#starts-rows tr")
    rows.filter(has_text="1 GPU per node instead of 2").wait_for()
    assert _labels(page) == [
        "As chosen",
        "1 GPU per node instead of 2",
        "Time limit 20 min instead of 40 min",
    ]
    chosen = rows.nth(0).inner_text()
    assert "now" in chosen or "in " in chosen, chosen  # a start, not a problem
    assert page.locator("#starts-basis").inner_text().startswith("Expected start: ")
    screenshot(page, "submit-starts")

    page.evaluate(WATCH)
    changed_at = page.evaluate("() => performance.now()")
    page.locator("#id_gpus_per_node").fill("1")
    page.wait_for_function(
        "() => !document.getElementById('starts-rows').textContent.includes('instead of 2')"
    )
    assert _labels(page) == ["As chosen", "Time limit 20 min instead of 40 min"]
    followed = page.evaluate("() => window.startsChanged") - changed_at
    print(f"expected starts followed a change in {followed:.0f} ms")

    # A time limit typed key by key: the preview waits for the typing to settle.
    before = len(asks)
    page.locator("#id_time_limit").fill("")
    page.locator("#id_time_limit").press_sequentially("1:30:00", delay=40)
    rows.filter(has_text="Time limit 45 min instead of 1 h 30 min").wait_for()
    assert 1 <= len(asks) - before <= 2, asks[before:]  # 8 edits, one or two asks

    take = rows.filter(has_text="Time limit 45 min instead of 1 h 30 min")
    take.get_by_role("button", name="use").click()
    rows.filter(has_text="Time limit 22 min instead of 45 min").wait_for()
    assert page.locator("#id_time_limit").input_value() == "0:45:00"
    assert errors == []
