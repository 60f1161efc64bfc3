// Copy buttons: `data-copy` names the element whose text goes to the clipboard.
(function () {
  "use strict";
  function fallback(text) {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
  }
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const text = document.getElementById(button.dataset.copy).textContent;
      let copied = false;
      try {
        await navigator.clipboard.writeText(text);
        copied = true;
      } catch (err) {
        copied = fallback(text);
      }
      button.textContent = copied ? "Copied" : "Select and copy by hand";
      setTimeout(() => (button.textContent = "Copy"), 2000);
    });
  }
})();
