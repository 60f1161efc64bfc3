// The job page's Notes card: saves the run's note, tags and group over the API
// (PATCH /api/v1/jobs/<id>/notes/) and redraws the tag and group links from the answer.
(function () {
  "use strict";
  const form = document.getElementById("run-notes-form");
  if (!form) return;
  const status = document.getElementById("run-notes-status");
  const labels = document.getElementById("run-labels");
  const FIELDS = ["note", "tags", "group"];

  function showErrors(errors) {
    for (const field of FIELDS) {
      const box = document.getElementById("run-" + field + "-error");
      const input = document.getElementById("run-" + field);
      const messages = errors[field] || [];
      box.textContent = messages.join(" ");
      box.hidden = messages.length === 0;
      input.setAttribute("aria-invalid", messages.length ? "true" : "false");
    }
  }

  function link(text, filter, cls, title) {
    const a = document.createElement("a");
    a.className = cls;
    a.href = labels.dataset.runs + "?f=" + encodeURIComponent(filter + "=" + text);
    a.title = title;
    a.textContent = text;
    return a;
  }

  function drawLabels(data) {
    labels.replaceChildren();
    labels.hidden = !data.group && data.tags.length === 0;
    if (data.group) {
      const word = document.createElement("span");
      word.className = "muted";
      word.textContent = "Group ";
      labels.append(word, link(data.group, "group", "run-group", "The runs of this group"));
    }
    for (const tag of data.tags) labels.append(link(tag, "tags", "run-tag", "The runs tagged " + tag));
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = new FormData(form);
    const payload = {
      note: body.get("note"),
      tags: String(body.get("tags")).split(/[\s,]+/).filter(Boolean),
      group: String(body.get("group")).trim(),
    };
    status.textContent = "Saving…";
    let response;
    try {
      response = await fetch(form.dataset.url, {
        method: "PATCH",
        credentials: "same-origin",
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json",
          "X-CSRFToken": body.get("csrfmiddlewaretoken"),
        },
        body: JSON.stringify(payload),
      });
    } catch (error) {
      status.textContent = "Not saved: the portal did not answer; try again.";
      return;
    }
    const data = await response.json().catch(() => ({}));
    if (response.ok) {
      showErrors({});
      form.elements.note.value = data.note;
      form.elements.tags.value = data.tags.join(", ");
      form.elements.group.value = data.group;
      drawLabels(data);
      status.textContent = "Saved.";
    } else if (response.status === 400) {
      showErrors(data);
      status.textContent = "Not saved: see the field marked.";
    } else {
      showErrors({});
      status.textContent = "Not saved: " + (data.detail || "the portal refused (" + response.status + ").");
    }
  });
})();
