// The runs table: filters one a line into f= parameters, picked columns into cols=,
// and the selected runs into a compare link. The table's state stays in the URL.
(function () {
  "use strict";
  const form = document.getElementById("runs-form");
  const filters = document.getElementById("runs-filters");
  const cols = document.getElementById("runs-cols");
  const compare = document.getElementById("compare-selected");
  const compareUrl = JSON.parse(document.getElementById("compare-url").textContent);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    const sort = form.querySelector("input[name=sort]").value;
    if (sort) params.set("sort", sort);
    const picked = [...form.querySelectorAll(".col-pick:checked")].map((box) => box.value);
    if (picked.length) params.set("cols", picked.join(","));
    else if (cols.value) params.set("cols", cols.value);
    filters.value.split("\n").map((line) => line.trim()).filter(Boolean).forEach((line) => params.append("f", line));
    window.location.search = params.toString();
  });
  // Picking a tag or group adds its filter (tags=x, group=x) and applies it.
  for (const quick of form.querySelectorAll("select[data-filter]")) {
    quick.addEventListener("change", () => {
      if (!quick.value) return;
      const line = `${quick.dataset.filter}=${quick.value}`;
      const lines = filters.value.split("\n").map((l) => l.trim()).filter(Boolean);
      if (!lines.includes(line)) lines.push(line);
      filters.value = lines.join("\n");
      form.requestSubmit();
    });
  }
  const picks = () => [...document.querySelectorAll(".run-pick:checked")].map((box) => box.value);
  document.getElementById("runs-table").addEventListener("change", () => {
    compare.disabled = picks().length < 1;
  });
  compare.addEventListener("click", () => {
    window.location.href = `${compareUrl}?runs=${picks().join(",")}`;
  });
})();
