// Job list: "select all" for the cancellable rows, and a confirmation before bulk cancel.
(function () {
  "use strict";
  const all = document.getElementById("select-all");
  const boxes = () => Array.from(document.querySelectorAll('input[name="job"]'));
  if (all) all.addEventListener("change", () => boxes().forEach((b) => { b.checked = all.checked; }));
  for (const button of document.querySelectorAll("[data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (button.id === "bulk-cancel" && !boxes().some((b) => b.checked)) {
        event.preventDefault();
        alert("Select the jobs to cancel first.");
        return;
      }
      if (!confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
})();
