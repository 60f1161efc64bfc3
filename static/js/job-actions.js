// The job page's actions bar: ask before cancelling; once the live state is final,
// the cancel button goes (the badge is updated by job.js).
(function () {
  "use strict";
  const FINAL = ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"];
  for (const button of document.querySelectorAll(".actions [data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
  const badge = document.getElementById("job-state");
  const cancel = document.getElementById("job-cancel");
  if (!badge || !cancel) return;
  const check = () => {
    const state = (badge.dataset.state || "").toUpperCase();
    if (FINAL.includes(state)) cancel.closest("form").remove();
  };
  new MutationObserver(check).observe(badge, { attributes: true, childList: true, characterData: true, subtree: true });
})();
