"""The nodes page's "Avoid another node" form in Chromium: its inputs look like the site's
other forms' (the job list's filters), side by side, and pinning a node through it works."""

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from tests import factories
from tests.helpers import browser_log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STYLE = """(el) => { const s = getComputedStyle(el); return {
  border: s.borderTopWidth + ' ' + s.borderTopStyle + ' ' + s.borderTopColor,
  radius: s.borderTopLeftRadius, padding: s.paddingTop + ' ' + s.paddingLeft,
  font: s.fontSize + ' ' + s.fontFamily, background: s.backgroundColor }; }"""


def test_the_avoid_form_is_styled_like_the_other_forms_and_pins_a_node(
    asgi_server, project, staff: User, page
) -> None:
    cluster = factories.cluster("alps")
    Cluster.objects.filter(pk=cluster.pk).update(ssh_host="127.0.0.1", ssh_port=1)
    browser_log_in(page, asgi_server, staff)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{asgi_server}/jobs/")
    reference = page.locator("form.filters input[name=user]").evaluate(STYLE)
    assert reference["radius"] == "6px", reference  # the site's inputs, as drawn

    page.goto(f"{asgi_server}/clusters/alps/nodes/")
    form = page.locator("#pin-form")
    node, why = form.locator("input[name=node]"), form.locator("input[name=reason]")
    assert node.evaluate(STYLE) == reference
    assert why.evaluate(STYLE) == reference
    # One row: the labels side by side, the button level with the inputs, the reason wider.
    boxes = [b for b in (node.bounding_box(), why.bounding_box()) if b]
    button = form.get_by_role("button", name="Avoid until cleared").bounding_box()
    assert len(boxes) == 2 and button is not None
    assert abs(boxes[0]["y"] - boxes[1]["y"]) < 1 and boxes[1]["width"] > boxes[0]["width"]
    assert abs((button["y"] + button["height"]) - (boxes[0]["y"] + boxes[0]["height"])) < 4
    form.scroll_into_view_if_needed()
    screenshot(page, "nodes-avoid-form")

    node.fill("n7")
    why.fill("ECC errors under load")
    form.get_by_role("button", name="Avoid until cleared").click()
    page.wait_for_load_state("load")
    assert "Node n7 is left out of new jobs until you clear it." in page.content()
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: nothing past the edge
    page.goto(f"{asgi_server}/clusters/alps/nodes/")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, width
    screenshot(page, "nodes-avoid-form-phone")
