// The porting checklist (rosetta_proof.checklist): show the ranked list of the pair of
// frameworks chosen, in the two selects or in the URL (?from=pytorch&to=jax). The page
// carries its opening pair; another pair's list is a script of its own beside the page
// (rosetta_book.checklist_pages), loaded when chosen, which hands it over through
// rosettaChecklistBlock: a script tag loads where the site is opened from disk, too.
window.rosettaChecklistBlock = (source, target, html) => {
  const selector = `.rosetta-checklist-block[data-from="${source}"][data-to="${target}"]`;
  for (const block of document.querySelectorAll(selector)) {
    block.innerHTML = html;
    delete block.dataset.src;
    block.dispatchEvent(new Event("rosetta-loaded", { bubbles: true }));
  }
};

document.addEventListener("DOMContentLoaded", () => {
  for (const list of document.querySelectorAll(".rosetta-checklist")) {
    const from = list.querySelector('select[name="from"]');
    const to = list.querySelector('select[name="to"]');
    const params = new URLSearchParams(window.location.search);
    const known = (name) => [...from.options].some((o) => o.value === name);
    from.value = known(params.get("from")) ? params.get("from") : "pytorch";
    to.value = known(params.get("to")) ? params.get("to") : "tensorflow";
    const show = () => {
      let shown = null;
      for (const block of list.querySelectorAll(".rosetta-checklist-block")) {
        block.hidden = !(block.dataset.from === from.value && block.dataset.to === to.value);
        if (!block.hidden) shown = block;
      }
      const count = list.querySelector(".rosetta-checklist-count");
      if (shown === null) {
        count.textContent = "choose two different frameworks";
      } else if (shown.dataset.src) {
        count.textContent = "loading this pair's list…";
        if (!shown.dataset.loading) {
          shown.dataset.loading = "yes";
          const script = document.createElement("script");
          script.src = new URL(shown.dataset.src, document.baseURI).href;
          script.onerror = () => {
            count.textContent = `this pair's list (${shown.dataset.src}) could not be loaded`;
          };
          document.head.append(script);
        }
      } else {
        const lines = shown.querySelectorAll(".rosetta-checklist-line");
        const first = shown.querySelectorAll("ol > .rosetta-checklist-line").length;
        count.textContent = `${lines.length} traps, ${first} of them silent first`;
      }
      const url = new URL(window.location.href);
      url.searchParams.set("from", from.value);
      url.searchParams.set("to", to.value);
      window.history.replaceState(null, "", url);
    };
    from.addEventListener("change", show);
    to.addEventListener("change", show);
    list.addEventListener("rosetta-loaded", show);
    show();
  }
});
