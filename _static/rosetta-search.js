// The book's search page (rosetta_book.search_index builds the index): one result per
// section, each linking to its anchor, with the words found marked in its own text.
// ?q= is the query; ?from=&to= narrow it to the table rows whose cells differ in that
// pair of frameworks, as the porting checklist lists them.
// Words a question is made of that say nothing of its answer.
const STOP_WORDS = new Set(("a an and are as at be but by can could did do does doing for from get gets " +
  "got has have how i i'm if in into is it it's its me my of on or our same so than that the their them " +
  "then there these they this to too us was we what when where which while who why will with would you " +
  "your vs versus equivalent instead like use using way").split(" "));

// A reader's question matches a section by any of its words, not only by all of them
// (Pagefind's own search): each word is searched alone, a section's score is the sum of
// its words' scores times the square of the share of the question's words it holds, so
// the sections that hold most of the question, and its rarest words, come first. A dotted
// or snake_case name counts whole and by its parts (`jax.nn.sigmoid` is found in code that
// writes it so, and in prose that names `sigmoid`), but the parts alone hold at most half
// of the name: a section that writes the name the reader typed comes before one that only
// uses its words apart.
async function rank(pagefind, query, options) {
  const typed = query.toLowerCase().split(/[\s,;:!?()"']+/).map((w) => w.replace(/^[.]+|[.]+$/g, ""));
  const names = [...new Set(typed)].filter((w) => w && !STOP_WORDS.has(w)).map((whole) => ({
    whole,
    parts: /[._=[\]]/.test(whole) ? [...new Set(whole.split(/[._=[\]]+/))].filter((p) => p && !STOP_WORDS.has(p)) : [],
  }));
  const words = [...new Set(names.flatMap((name) => [name.whole, ...name.parts]))];
  if (words.length <= 1) return pagefind.search(words[0] || query, options);
  const found = new Map(await Promise.all(words.map(async (word) => [word, await pagefind.search(word, options)])));
  const sections = new Map();
  for (const [word, results] of found) {
    for (const result of results?.results || []) {
      const entry = sections.get(result.id) || { score: 0, words: new Set(), result };
      entry.score += result.score;
      entry.words.add(word);
      sections.set(result.id, entry);
    }
  }
  const held = (entry, name) => (entry.words.has(name.whole) ? 1
    : name.parts.length ? name.parts.filter((part) => entry.words.has(part)).length / name.parts.length / 2 : 0);
  const ranked = [...sections.values()].map((entry) => ({
    result: entry.result,
    score: entry.score * (names.reduce((sum, name) => sum + held(entry, name), 0) / names.length) ** 2,
  }));
  const results = ranked.sort((a, b) => b.score - a.score).map((entry) => entry.result);
  return { results };
}

document.addEventListener("DOMContentLoaded", async () => {
  const box = document.getElementById("rosetta-search");
  if (!box) return;
  const root = new URL(document.documentElement.dataset.content_root || "./", document.baseURI);
  const out = document.getElementById("search-results");
  const input = box.querySelector('input[name="q"]');
  const from = box.querySelector('select[name="from"]');
  const to = box.querySelector('select[name="to"]');
  const params = new URLSearchParams(window.location.search);
  input.value = params.get("q") || "";
  for (const select of [from, to]) {
    const wanted = params.get(select.name) || "";
    select.value = [...select.options].some((o) => o.value === wanted) ? wanted : "";
  }
  const say = (text, className = "search-summary") => {
    const line = document.createElement("p");
    line.className = className;
    line.textContent = text;
    out.append(line);
  };
  let pagefind;
  try {
    pagefind = await import(new URL("pagefind/pagefind.js", root).href);
    // termSimilarity 4 (Pagefind's default 1): a word that only begins with the one typed
    // ("eval" in "evaluation") counts for less; 84 questions: 3 more land in the top 3.
    await pagefind.options({ excerptLength: 30, ranking: { termSimilarity: 4 } });
  } catch (error) {
    say(window.location.protocol === "file:"
      ? "Search runs where the site is served: browsers refuse its index on a page opened from disk. " +
        "Serve the built site, e.g. `python -m http.server -d _build/html`, and open http://localhost:8000/."
      : `This site's search index (pagefind/) could not be loaded: ${error.message}`);
    return;
  }
  let asked = 0;
  const run = async () => {
    const number = ++asked;
    const query = input.value.trim();
    const pair = from.value && to.value && from.value !== to.value ? `${from.value}>${to.value}` : null;
    const url = new URL(window.location.href);
    for (const [key, value] of [["q", query], ["from", from.value], ["to", to.value]]) {
      if (value) url.searchParams.set(key, value); else url.searchParams.delete(key);
    }
    window.history.replaceState(null, "", url);
    if (!query) {
      out.replaceChildren();
      say("Type a question or a name: a layer, an argument, a trap.");
      return;
    }
    const found = await rank(pagefind, query, pair ? { filters: { pair } } : {});
    const shown = await Promise.all(found.results.slice(0, 10).map((r) => r.data()));
    if (number !== asked) return; // a later query has started
    out.replaceChildren();
    const list = document.createElement("ul");
    list.className = "search";
    for (const data of shown) {
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = new URL(data.meta.url || data.url, root).href;
      link.textContent = data.meta.title;
      const page = document.createElement("span");
      page.className = "rosetta-search-page";
      page.textContent = ` (${data.meta.page})`;
      const excerpt = document.createElement("p");
      excerpt.className = "context";
      excerpt.innerHTML = data.excerpt; // the section's own text, Pagefind marks the words
      item.append(link, page, excerpt);
      list.append(item);
    }
    out.append(list);
    const where = pair ? ` among the rows that differ from ${from.selectedOptions[0].text} to ${to.selectedOptions[0].text}` : "";
    say(found.results.length
      ? `${found.results.length} sections match “${query}”${where}${found.results.length > shown.length ? `; the first ${shown.length} shown` : ""}.`
      : `No section matches “${query}”${where}.`);
  };
  for (const select of [from, to]) select.addEventListener("change", run);
  box.querySelector("form").addEventListener("submit", (event) => {
    event.preventDefault();
    run();
  });
  run();
});
