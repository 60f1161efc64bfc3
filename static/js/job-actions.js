// The job page's actions bar: ask before cancelling.
(function () {
  "use strict";
  for (const button of document.querySelectorAll(".actions [data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
})();
