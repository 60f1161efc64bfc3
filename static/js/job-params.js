// The job page's settings: a search box that keeps the rows whose name or value match.
(function () {
  "use strict";
  const box = document.getElementById("params-search");
  if (!box) return;
  box.addEventListener("input", () => {
    const q = box.value.trim().toLowerCase();
    document.querySelectorAll("#job-params tr[data-param]").forEach((row) => {
      row.hidden = q !== "" && !row.dataset.param.includes(q);
    });
  });
})();
