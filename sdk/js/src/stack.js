// JavaScript stack lines as the plugin's author wrote them.
//
// A component runs one bundle (`/NAME.js`), so QuickJS's stack lines point into it. The build
// (`cairn-js-build`) reads esbuild's source map and appends a line table to the bundle:
// `globalThis.__cairnSourceLines = { file, sources, lines }`, where `lines[2 * (n - 1)]` is the
// index in `sources` of bundle line `n`'s first mapped segment (or -1) and `lines[2 * (n - 1) + 1]`
// its line there. Appending leaves every earlier bundle line where it was.

/**
 * @typedef {object} SourceLines
 * @property {string} file the bundle's name as stack lines give it (`NAME.js`)
 * @property {string[]} sources project-relative paths (`src/index.js`, `cairn-sdk/src/plugin.js`)
 * @property {number[]} lines pairs of (source index or -1, 1-based line) per bundle line
 */

/** @returns {SourceLines | undefined} */
function installed() {
  return /** @type {any} */ (globalThis).__cairnSourceLines;
}

/**
 * Where bundle line `line` came from, as `path:line`, if the table knows.
 * @param {SourceLines} table
 * @param {number} line
 * @returns {string | undefined}
 */
function origin(table, line) {
  const source = table.lines[2 * (line - 1)];
  if (source === undefined || source < 0) {
    return undefined;
  }
  return `${table.sources[source]}:${table.lines[2 * (line - 1) + 1]}`;
}

/**
 * `stack` with each `/NAME.js:LINE:COLUMN` of the bundle replaced by `path:line` of the source.
 * @param {string} stack
 * @param {SourceLines | undefined} [table]
 * @returns {string}
 */
export function mapStack(stack, table = installed()) {
  if (!table) {
    return stack;
  }
  const file = table.file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return stack.replace(new RegExp(`/?${file}:(\\d+)(?::\\d+)?`, 'g'), (whole, line) => origin(table, Number(line)) ?? whole);
}

/**
 * The first frame of `stack` in the plugin's own code (not the SDK's, not a dependency's), as
 * `path:line`, once mapped.
 * @param {string} stack
 * @param {SourceLines | undefined} [table]
 * @returns {string | undefined}
 */
export function firstOwnFrame(stack, table = installed()) {
  if (!table) {
    return undefined;
  }
  for (const match of mapStack(stack, table).matchAll(/\(?([^\s()]+\.[cm]?js):(\d+)\)?/g)) {
    const path = match[1];
    if (!path.startsWith('/') && !path.includes('node_modules/') && !path.startsWith('cairn-sdk/') && !path.includes('sdk/js/') && path !== 'cairn-entry.js') {
      return `${path}:${match[2]}`;
    }
  }
  return undefined;
}

/**
 * Decodes a source map's `mappings` into the line table `mapStack` reads (used by the build,
 * in Node).
 * @param {{ sources: string[], mappings: string }} map
 * @returns {number[]}
 */
export function lineTable(map) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const lines = [];
  let source = 0;
  let originalLine = 0;
  for (const generated of map.mappings.split(';')) {
    let first = /** @type {[number, number] | undefined} */ (undefined);
    for (const segment of generated.split(',')) {
      if (!segment) continue;
      const fields = [];
      let value = 0;
      let shift = 0;
      for (const char of segment) {
        const digit = alphabet.indexOf(char);
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      if (fields.length >= 4) {
        source += fields[1];
        originalLine += fields[2];
        first ??= [source, originalLine + 1];
      }
    }
    lines.push(...(first ?? [-1, 0]));
  }
  return lines;
}
