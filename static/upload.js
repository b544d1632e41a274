// The upload form: the operator list shows the chosen release's operators only.
(function () {
  "use strict";
  function sync() {
    const release = document.getElementById("release-choice");
    const operator = document.getElementById("operator-choice");
    if (!release || !operator) return;
    operator.querySelectorAll("optgroup").forEach((group) => {
      const mine = group.dataset.release === release.value;
      group.hidden = !mine;
      group.disabled = !mine;
    });
    const chosen = operator.selectedOptions[0];
    if (chosen && chosen.parentElement.disabled) operator.value = "";
  }
  document.addEventListener("DOMContentLoaded", () => {
    const release = document.getElementById("release-choice");
    if (release) release.addEventListener("change", sync);
    sync();
  });
}());
