// The host's capabilities behind one indirection. In the component, the entry module that
// `cairn-js-build` generates imports exactly the capabilities the manifest declares and hands them
// to `installHost`; in plain node (`node --test`) a test installs fakes instead (see
// `@cairn/sdk/testing`). Plugin code never imports `cairn:compaction/*` itself, so the same module
// runs in both places.

/** @typedef {typeof import('cairn:compaction/log@0.2.0')} LogCapability */
/** @typedef {typeof import('cairn:compaction/tokens@0.2.0')} TokensCapability */
/** @typedef {typeof import('cairn:compaction/model@0.2.0')} ModelCapability */
/** @typedef {typeof import('cairn:compaction/archive@0.2.0')} ArchiveCapability */

/**
 * What a plugin can reach. Each one is there only if the manifest declares it (and, at run time,
 * works only if the policy grants it).
 * @typedef {object} Host
 * @property {Pick<LogCapability, 'log'>} [log]
 * @property {Pick<TokensCapability, 'count'>} [tokens]
 * @property {Pick<ModelCapability, 'complete'>} [model]
 * @property {Pick<ArchiveCapability, 'readSummary' | 'search' | 'pageEntries' | 'putArtifact'>} [archive]
 */

/** @type {Host} */
let current = {};

/**
 * Installs the capabilities plugin code reaches through this SDK, replacing any installed before.
 * The generated component entry calls it once; tests call it (or `fakeHost`) to stand in for the host.
 * @param {Host} host
 */
export function installHost(host) {
  current = { ...host };
}

/**
 * The installed capability `name`; a clear error when the plugin's manifest does not declare it
 * (in the component this error traps the call: the host reports it as `trap`).
 * @template {keyof Host} K
 * @param {K} name
 * @returns {NonNullable<Host[K]>}
 */
export function capability(name) {
  const found = current[name];
  if (!found) {
    throw new Error(`the \`${name}\` capability is not available: add "${name}" to capabilities (or optional_capabilities) in cairn-plugin.toml`);
  }
  return /** @type {NonNullable<Host[K]>} */ (found);
}

/**
 * Whether capability `name` is there (declared in the manifest, or faked by a test).
 * @param {keyof Host} name
 * @returns {boolean}
 */
export function hasCapability(name) {
  return current[name] !== undefined;
}
