// Search in the job page's log console: case-insensitive, plain text or a regular
// expression, optionally only the matching lines, with next/previous. The log is
// the job's own output: marks are capped, and a pattern that matches the empty
// string still moves on, so no log can make the page hang here.
(function () {
  "use strict";
  const MAX_MARKS = 5000;
  const MAX_COUNT = 200000;

  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

  window.LogSearch = function (els) {
    // els: {log, input, regex, filter, matches, prev, next, onMove}
    let current = 0;
    let marks = [];

    function matcher() {
      const term = els.input.value;
      if (!term) return { re: null, error: "" };
      try {
        return { re: new RegExp(els.regex.checked ? term : escape(term), "gi"), error: "" };
      } catch (err) {
        return { re: null, error: `Not a regular expression: ${err.message}` };
      }
    }

    function matchingLines(text, re) {
      const kept = [];
      for (const line of text.split("\n")) {
        re.lastIndex = 0;
        if (re.test(line)) kept.push(line);
      }
      return kept;
    }

    // Returns true when it drew the text itself (a search is on).
    function draw(text) {
      const { re, error } = matcher();
      els.input.classList.toggle("invalid", Boolean(error));
      els.input.setAttribute("aria-invalid", error ? "true" : "false");
      if (!re) {
        marks = [];
        els.matches.textContent = error;
        els.matches.classList.toggle("error", Boolean(error));
        els.log.textContent = text;
        return Boolean(error);
      }
      els.matches.classList.remove("error");
      let source = text;
      let lines = null;
      if (els.filter.checked) {
        lines = matchingLines(text, re);
        source = lines.join("\n");
      }
      const fragment = document.createDocumentFragment();
      marks = [];
      let count = 0;
      let last = 0;
      re.lastIndex = 0;
      let m;
      while ((m = re.exec(source)) !== null && count < MAX_COUNT) {
        if (m[0] === "") { re.lastIndex += 1; continue; }
        count += 1;
        if (marks.length < MAX_MARKS) {
          fragment.append(source.slice(last, m.index));
          const mark = document.createElement("mark");
          mark.textContent = m[0];
          fragment.append(mark);
          marks.push(mark);
          last = m.index + m[0].length;
        }
      }
      fragment.append(source.slice(last));
      els.log.replaceChildren(fragment);
      if (current >= marks.length) current = Math.max(marks.length - 1, 0);
      highlight(false);
      const more = count >= MAX_COUNT ? "+" : "";
      const where = lines ? ` in ${lines.length} line${lines.length === 1 ? "" : "s"}` : "";
      const at = marks.length ? `${current + 1} of ` : "";
      els.matches.textContent = count ? `${at}${count}${more} match${count === 1 ? "" : "es"}${where}` : "no matches";
      return true;
    }

    function highlight(scroll) {
      marks.forEach((mark, i) => mark.classList.toggle("current", i === current));
      const mark = marks[current];
      if (scroll && mark) {
        const top = mark.offsetTop - els.log.offsetTop - els.log.clientHeight / 2;
        els.log.scrollTop = Math.max(top, 0);
      }
    }

    function move(step) {
      if (!marks.length) return;
      current = (current + step + marks.length) % marks.length;
      if (els.onMove) els.onMove();
      highlight(true);
      els.matches.textContent = els.matches.textContent.replace(/^\d+ of /, `${current + 1} of `);
    }

    els.next.addEventListener("click", () => move(1));
    els.prev.addEventListener("click", () => move(-1));
    els.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") { event.preventDefault(); move(event.shiftKey ? -1 : 1); }
    });
    return { draw, active: () => Boolean(els.input.value), reset: () => { current = 0; } };
  };
})();
