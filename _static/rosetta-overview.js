// A table page's overview (its compact table) links each row to the row's section; this
// links each section back to its line of the overview, so a reader who lands on a row
// (from search or the checklist) reaches every framework's call for it in one click.
document.addEventListener("DOMContentLoaded", () => {
  for (const link of document.querySelectorAll('.rosetta-compact-table td:first-child a[href^="#"]')) {
    const target = document.getElementById(decodeURIComponent(link.hash.slice(1)));
    const row = link.closest("tr");
    if (!target || !row) continue;
    row.id = row.id || `overview-${target.id}`;
    const section = target.tagName === "SECTION" ? target : target.closest("section");
    const heading = section && section.querySelector(":scope > h2, :scope > h3, :scope > h4");
    if (!heading || heading.querySelector(".rosetta-overview-link")) continue;
    const back = document.createElement("a");
    back.className = "rosetta-overview-link";
    back.href = `#${row.id}`;
    back.title = "This row's line in the page's overview table";
    back.textContent = "↑ overview";
    heading.append(" ", back);
  }
});
