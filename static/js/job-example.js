// The DDP (torchrun) template offers the example trainer the README names, while the
// command is still empty: as the box's placeholder and as one click that fills it in.
// A JupyterLab session's box shows `jupyter lab` as its placeholder.
(function () {
  "use strict";
  const form = document.getElementById("job-form");
  const template = document.getElementById("id_template");
  const command = document.getElementById("id_command");
  if (!form || !template || !command || !command.dataset.example) return;
  const example = command.dataset.example;
  const offer = document.createElement("button");
  offer.type = "button";
  offer.id = "use-example";
  offer.className = "secondary small";
  offer.textContent = "Use the example trainer";
  offer.title = example;
  offer.hidden = true;
  command.insertAdjacentElement("afterend", offer);

  function show() {
    const torchrun = template.value === "torchrun";
    // A JupyterLab session's command is the program that starts it.
    command.placeholder = torchrun ? example : template.value === "jupyter" ? "jupyter lab" : "";
    offer.hidden = !torchrun || command.value.trim() !== "";
  }
  offer.addEventListener("click", () => {
    command.value = example;
    command.dispatchEvent(new Event("input", { bubbles: true })); // the preview follows
    show();
    command.focus();
  });
  template.addEventListener("change", show);
  command.addEventListener("input", show);
  show();
})();
