// The porting checklist (rosetta_proof.checklist): show the lines that matter for the pair
// of frameworks chosen, in the two selects or in the URL (?from=pytorch&to=jax).
document.addEventListener("DOMContentLoaded", () => {
  for (const list of document.querySelectorAll(".rosetta-checklist")) {
    const from = list.querySelector('select[name="from"]');
    const to = list.querySelector('select[name="to"]');
    const params = new URLSearchParams(window.location.search);
    const known = (name) => [...from.options].some((o) => o.value === name);
    from.value = known(params.get("from")) ? params.get("from") : "pytorch";
    to.value = known(params.get("to")) ? params.get("to") : "tensorflow";
    const show = () => {
      const pair = new Set([from.value, to.value]);
      let shown = 0;
      for (const line of list.querySelectorAll(".rosetta-checklist-line")) {
        const matters = line.dataset.frameworks.split(" ").some((name) => pair.has(name));
        line.hidden = !matters;
        shown += matters ? 1 : 0;
        for (const cell of line.querySelectorAll("li[data-framework]")) {
          cell.hidden = !pair.has(cell.dataset.framework);
        }
      }
      for (const heading of list.querySelectorAll("h3")) {
        const items = heading.nextElementSibling;
        const any = [...items.children].some((line) => !line.hidden);
        heading.hidden = !any;
        items.hidden = !any;
      }
      list.querySelector(".rosetta-checklist-count").textContent = `${shown} traps`;
      const url = new URL(window.location.href);
      url.searchParams.set("from", from.value);
      url.searchParams.set("to", to.value);
      window.history.replaceState(null, "", url);
    };
    from.addEventListener("change", show);
    to.addEventListener("change", show);
    show();
  }
});
