// A button or form with data-confirm asks before it posts: actions that cannot be taken back
// with one more click (revoking a token, activating weights, freezing a board) need a second
// look. Cancelling the dialog leaves the page as it was.
document.addEventListener("submit", (event) => {
  const asker = event.submitter?.closest("[data-confirm]") || event.target.closest("[data-confirm]");
  if (asker && !window.confirm(asker.dataset.confirm)) {
    event.preventDefault();
    event.stopImmediatePropagation();  // nor may htmx post it
  }
}, true);
