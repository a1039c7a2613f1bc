// Drives `cairn ui` in headless Chromium (puppeteer-core, no browser download): the
// conversations page, the timeline, both compactions stage by stage (what each stage elided,
// with its placeholder, summarized, dropped and kept verbatim, with tokens that add up; the
// default policy's two stages and the offline checkpoint step said as such) and an artifact, then undo, pin and unpin; a full-page PNG of each into OUT_DIR. Environment: UI_URL (the URL `cairn ui --json`
// printed), CONVERSATION, PUPPETEER_DIR (where puppeteer-core is installed), OUT_DIR, CHROME.
// Exits non-zero on the first failed check.
import { createRequire } from 'node:module';
import path from 'node:path';
import fs from 'node:fs';

const require = createRequire(path.join(process.env.PUPPETEER_DIR, 'package.json'));
const puppeteer = require('puppeteer-core');

const url = new URL(process.env.UI_URL);
const conversation = process.env.CONVERSATION;
const out = process.env.OUT_DIR;
fs.mkdirSync(out, { recursive: true });

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok: ${what}`);
}

// Without the token, or with a wrong one, every route answers 401.
for (const p of ['/', '/api/conversations', `/api/timeline?conversation=${conversation}`, '/artifact?uri=artifact://a-0/1', '/?token=00000000000000000000000000000000']) {
  const r = await fetch(url.origin + p);
  check(r.status === 401, `GET ${p} without the right token: 401 (got ${r.status})`);
}
{
  const r = await fetch(`${url.origin}/api/undo?conversation=${conversation}`, { method: 'POST' });
  check(r.status === 401, `POST /api/undo without the token: 401 (got ${r.status})`);
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROME || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
});
const shots = [];
async function shot(page, name) {
  const file = path.join(out, name);
  await page.screenshot({ path: file, fullPage: true });
  shots.push(file);
  console.log(`screenshot: ${file}`);
}

try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 800 });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('dialog', (d) => d.accept());

  // 1. Conversations.
  await page.goto(url.href, { waitUntil: 'networkidle0' });
  await page.waitForSelector(`tr.conversation[data-conversation="${conversation}"]`);
  const compactions = await page.$eval(`tr.conversation[data-conversation="${conversation}"] td.compactions`, (td) => td.textContent);
  check(Number(compactions) >= 2, `the conversations page lists ${conversation} with ${compactions} compactions`);
  await shot(page, '1-conversations.png');

  // 2. Timeline.
  await Promise.all([page.waitForNavigation({ waitUntil: 'networkidle0' }), page.click(`tr.conversation[data-conversation="${conversation}"] a.open`)]);
  await page.waitForSelector('#moments');
  const moments = await page.$$eval('li.moment.compaction', (lis) => lis.map((li) => ({ id: li.dataset.archiveId, status: li.dataset.status })));
  check(moments.length >= 2, `the timeline lists both compactions: ${JSON.stringify(moments)}`);
  const committed = moments.filter((m) => m.status === 'committed').at(-1);
  check(committed && moments.filter((m) => m.status === 'committed').length === 2, `both are committed: ${JSON.stringify(moments)}`);
  check((await page.$$('svg#chart g.bars rect.after')).length === moments.length, 'the chart has a bar per compaction');
  check(await page.$eval('#undo', (b) => !b.disabled), 'the undo button is enabled');
  await shot(page, '2-timeline.png');
  const timelineUrl = page.url();

  // 3. Each compaction's view: what became of every replaced entry, highlighted by kind.
  async function openCompaction(id) {
    await page.goto(timelineUrl, { waitUntil: 'networkidle0' });
    await Promise.all([
      page.waitForNavigation({ waitUntil: 'networkidle0' }),
      page.click(`li.moment.compaction[data-archive-id="${id}"] a.open-compaction`),
    ]);
    await page.waitForSelector('#steps tr.step');
    check((await page.$eval('h1', (h) => h.dataset.archiveId)) === id, `the compaction view shows ${id}`);
    const steps = await page.$$eval('#steps tr.step', (rows) => rows.map((r) => r.dataset.outcome));
    check(steps.includes('ok'), `its steps and outcomes are shown: ${steps}`);
    const counts = {};
    for (const part of ['summarized', 'summary', 'elided', 'dropped', 'kept', 'tail']) counts[part] = (await page.$$(`.entry.${part}`)).length;
    const colours = {};
    for (const part of Object.keys(counts).filter((k) => counts[k] > 0)) {
      colours[part] = await page.$eval(`.entry.${part}`, (e) => getComputedStyle(e).backgroundColor);
    }
    check(new Set(Object.values(colours)).size === Object.keys(colours).length, `each kind of entry has its own highlight: ${JSON.stringify(colours)}`);
    // Stage by stage, the parts add up to the stage's tokens before and after.
    const stages = await page.$$eval('section.stage', (ss) => ss.map((s) => {
      const parts = Object.fromEntries([...s.querySelectorAll('section.part')].map((p) => [p.dataset.part, { tokens: Number(p.dataset.tokens), count: Number(p.dataset.count), after: p.dataset.tokensAfter === '' ? null : Number(p.dataset.tokensAfter) }]));
      return { stage: s.dataset.stage, status: s.dataset.status, before: Number(s.dataset.tokensBefore), after: Number(s.dataset.tokensAfter), parts, text: s.querySelector('h2').textContent };
    }));
    check(stages.length > 0, `the compaction's stages: ${JSON.stringify(stages.map((s) => [s.stage, s.status]))}`);
    for (const st of stages.filter((s) => s.status === 'committed')) {
      const t = (k) => st.parts[k]?.tokens ?? 0;
      const before = t('kept') + t('tail') + t('elided') + t('summarized') + t('dropped');
      const after = t('kept') + t('tail') + (st.parts.elided?.after ?? 0) + t('summaries');
      check(before === st.before && after === st.after, `stage ${st.stage}: its parts add up to ${st.before} → ${st.after} (${before} → ${after})`);
    }
    return { counts, stages };
    return counts;
  }
  const firstCompaction = moments.find((m) => m.id !== committed.id);
  const { counts, stages } = await openCompaction(firstCompaction.id);
  check(counts.summarized + counts.elided > 0 && counts.summary > 0, `the first compaction's summarized entries and its summary: ${JSON.stringify(counts)}`);
  // The default policy's two stages: what shake-elide elided and what stayed verbatim are
  // listed with their tokens (not "0 entries" because the checkpoint stage summarized them).
  const [offload, summarize] = stages;
  check(offload && offload.stage === 'offload' && summarize && summarize.stage === 'summarize', `the default policy's two stages: ${JSON.stringify(stages.map((s) => s.stage))}`);
  check(offload.parts.elided?.count > 0 && offload.parts.elided.tokens > 0 && offload.parts.elided.after < offload.parts.elided.tokens,
    `the offload stage lists what it elided, ${JSON.stringify(offload.parts.elided)}`);
  check(offload.parts.tail?.tokens > 0 && summarize.parts.tail?.tokens > 0, `the verbatim tail is listed as kept verbatim with its tokens: ${offload.parts.tail?.tokens}, ${summarize.parts.tail?.tokens}`);
  check(summarize.status === 'committed' && summarize.parts.summarized?.count > 0 && summarize.parts.summaries?.count > 0, `the summarize stage: summarized into a checkpoint`);
  const placeholder = await page.$eval('section.stage[data-stage="offload"] .entry.elided .placeholder code', (c) => c.textContent);
  check(placeholder.includes('artifact://'), `an elided entry shows the placeholder that replaced it: ${placeholder}`);
  const offline = await page.$$eval('#steps tr.step[data-plugin^="checkpoint-json"]', (rows) => rows.map((r) => ({ note: r.querySelector('.note')?.textContent ?? '', refused: r.querySelector('.refused')?.textContent ?? '' })));
  check(offline.length > 0 && offline.every((o) => o.note.includes('offline by policy') && o.refused === ''), `checkpoint-json without a model reads "offline by policy", not a refusal: ${JSON.stringify(offline)}`);
  const link = await page.$eval('a.artifact', (a) => ({ href: a.href, uri: a.dataset.uri }));
  check(link.uri.startsWith('artifact://'), `an artifact link: ${link.uri}`);
  await shot(page, '3-compaction.png');
  const { counts: dropped } = await openCompaction(committed.id);
  check(dropped.dropped > 0, `the last resort's dropped entries are shown: ${JSON.stringify(dropped)}`);
  // The smallest dropped entry, to pin once the undo has put it back in the context.
  const toPin = await page.$$eval('.entry.dropped', (es) => es.map((e) => ({ id: e.dataset.id, tokens: Number(e.dataset.tokens) })).sort((a, b) => a.tokens - b.tokens)[0]);
  await shot(page, '3b-dropped.png');

  // The artifact opens: its bytes, as text/plain.
  const tab = await browser.newPage();
  await tab.setViewport({ width: 1200, height: 800 });
  const response = await tab.goto(link.href);
  check(response.status() === 200, `the artifact opens (${response.status()})`);
  check(response.headers()['content-type'].startsWith('text/plain'), `as text/plain (${response.headers()['content-type']})`);
  const body = await response.text();
  check(body.length > 0, `with the original's ${body.length} bytes`);
  await shot(tab, '4-artifact.png');
  await tab.close();

  // 4. Undo the last compaction from the timeline.
  await page.goto(timelineUrl, { waitUntil: 'networkidle0' });
  await page.waitForSelector('#undo');
  check((await page.$$('li.moment.undo')).length === 0, 'no undo before');
  await page.click('#undo');
  await page.waitForSelector('li.moment.undo', { timeout: 60_000 });
  const undone = await page.$eval('li.moment.undo', (li) => li.dataset.undone);
  check(undone.split(' ').includes(committed.id), `the timeline shows the undo of ${committed.id}`);
  const status = await page.$eval(`li.moment.compaction[data-archive-id="${committed.id}"]`, (li) => li.dataset.status);
  check(status === 'undone', `${committed.id} is now ${status}`);
  check((await page.$eval(`li.moment.compaction[data-archive-id="${firstCompaction.id}"]`, (li) => li.dataset.status)) === 'committed', 'the compaction before it stands');
  check((await page.$eval('li.moment.undo a', (a) => a.textContent)) === committed.id, 'the undo links the compaction it took back');

  // Pin an entry the undo brought back (the API, as the compaction view's button does), then
  // unpin it with the timeline's button.
  const pinned = await page.evaluate(async (id, conversation) => {
    const token = new URLSearchParams(location.search).get('token');
    const r = await fetch(`/api/pin?${new URLSearchParams({ token, conversation, id, pinned: 'true' })}`, { method: 'POST' });
    return { status: r.status, body: await r.text() };
  }, toPin.id, conversation);
  check(pinned.status === 200, `pinning ${toPin.id} (${toPin.tokens} tokens): ${pinned.status} ${pinned.body}`);
  await page.reload({ waitUntil: 'networkidle0' });
  await page.waitForSelector(`#pins li.pin[data-id="${toPin.id}"]`);
  check((await page.$$('li.moment.pin.pinned')).length === 1, 'the timeline shows the pin');
  await shot(page, '5-after-undo.png');
  await page.click(`#pins li.pin[data-id="${toPin.id}"] button.unpin`);
  await page.waitForSelector('li.moment.pin.unpinned');
  check((await page.$$('#pins li.pin')).length === 0, `${toPin.id} is unpinned`);

  check(errors.length === 0, `no script errors on the page ${JSON.stringify(errors)}`);
  console.log(JSON.stringify({ screenshots: shots, undone: committed.id }));
} finally {
  await browser.close();
}
