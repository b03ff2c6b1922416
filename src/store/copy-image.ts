import { isSealed } from './crypto.js';
import type { ToolCache } from './records.js';
import type { RecordRepository, Repositories, RepositorySet } from './repositories.js';
import type { DbMeta } from './schema.js';
import { mcpEnvSealId, mcpHeaderSealId, SEAL_KINDS } from './seal-kinds.js';

/**
 * Everything a store holds, read whole through the repositories, so that `svc store copy` can
 * move a data dir's store into a team's database: read it (readImage), open every sealed value
 * with the data dir's master key and seal it again with the team's (resealImage), and write it
 * into an empty database in one transaction (writeImage). Nothing here knows either backend.
 */

/** The repositories that hold records under a key, in the order they are copied. */
export const RECORD_SETS = [
  'users',
  'sessions',
  'oauthClients',
  'accessRequests',
  'apiKeys',
  'oauthState',
  'providers',
  'mcpInstances',
  'modelAliases',
  'modelPulls',
] as const satisfies readonly (keyof RepositorySet)[];

export type RecordSetName = (typeof RECORD_SETS)[number];
type RecordOf<N extends RecordSetName> = RepositorySet[N] extends RecordRepository<infer T> ? T : never;

export type StoreImage = { [N in RecordSetName]: RecordOf<N>[] } & {
  /** each MCP instance's cached tool list, under the instance's id */
  mcpTools: [string, ToolCache][];
  meta: DbMeta;
  signingKeys: string | undefined;
};

/** What opens and seals a value (a SecretBox). */
export interface Sealer {
  open(kind: string, id: string, sealed: string): string;
  seal(kind: string, id: string, plaintext: string): string;
}

/** The copy was refused before anything was written; the message says why and what to do. */
export class CopyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CopyError';
  }
}

/** The database already holds svc data: a copy never merges into it. */
export class TargetNotEmptyError extends CopyError {
  constructor(
    readonly where: string,
    readonly holding: string[],
  ) {
    super(
      `The database at ${where} is not empty (it holds ${holding.join(', ')}): svc store copy writes only into a database no svc has used, so nothing was written. ` +
        'Create a new database (createdb) and copy into that.',
    );
    this.name = 'TargetNotEmptyError';
  }
}

/** Reads every record, tool list and value of `source`; a store with no meta (never started) is refused. */
export async function readImage(source: RepositorySet, where: string): Promise<StoreImage> {
  const meta = await source.meta.get();
  if (!meta) throw new CopyError(`There is no svc store in ${where} yet: nothing to copy.`);
  // one after the other: a backend's transaction may have a single connection
  const entries: [RecordSetName, unknown[]][] = [];
  for (const name of RECORD_SETS) entries.push([name, await (source[name] as RecordRepository<unknown>).list()]);
  const records = Object.fromEntries(entries) as { [N in RecordSetName]: RecordOf<N>[] };
  const mcpTools: [string, ToolCache][] = [];
  for (const instance of records.mcpInstances) {
    const cache = await source.mcpTools.get(instance.id);
    if (cache) mcpTools.push([instance.id, cache]);
  }
  return { ...records, mcpTools, meta, signingKeys: await source.signingKeys.get() };
}

/** Opens a value sealed with one key and seals it with the other, remembering what it made. */
function resealer(from: Sealer, to: Sealer) {
  const made = new Set<string>();
  const again = (kind: string, id: string, sealed: string, what: string): string => {
    let plain: string;
    try {
      plain = from.open(kind, id, sealed);
    } catch {
      throw new CopyError(`${what} does not open with the data dir's master key (damaged, or sealed by another store); nothing was written.`);
    }
    const value = to.seal(kind, id, plain);
    made.add(value);
    return value;
  };
  return { again, made };
}

/**
 * The image with every sealed value sealed again with `to` (the team's key) and its meta a
 * team's. A sealed value this does not know how to move is refused (rather than carried over
 * unopenable); downloads that name no replica get `replica`, this machine's, whose data dir holds
 * their files.
 */
export function resealImage(image: StoreImage, from: Sealer, to: Sealer, opts: { replica?: string } = {}): StoreImage {
  const { again, made } = resealer(from, to);
  const K = SEAL_KINDS;
  const next: StoreImage = {
    ...image,
    meta: {
      ...image.meta,
      key_backend: 'team',
      key_check: again(K.meta, 'key_check', image.meta.key_check, "The store's key check"),
      session_keys: again(K.meta, 'session_keys', image.meta.session_keys, 'The cookie-signing keys'),
    },
    signingKeys: image.signingKeys === undefined ? undefined : again(K.signingKeys, 'jwks', image.signingKeys, 'The token-signing keys'),
    providers: image.providers.map((p) => (p.api_key ? { ...p, api_key: again(K.providerApiKey, p.name, p.api_key, `The API key of provider ${p.name}`) } : p)),
    mcpInstances: image.mcpInstances.map((m) => ({
      ...m,
      headers: m.headers.map((h) => ({ ...h, value: again(K.mcpHeader, mcpHeaderSealId(m.id, h.name), h.value, `Header ${h.name} of MCP instance ${m.id}`) })),
      ...(m.command
        ? {
            command: {
              ...m.command,
              env: m.command.env.map((e) => ({ ...e, value: again(K.mcpEnv, mcpEnvSealId(m.id, e.name), e.value, `Variable ${e.name} of MCP instance ${m.id}`) })),
            },
          }
        : {}),
    })),
    oauthClients: image.oauthClients.map((c) =>
      c.client_secret ? { ...c, client_secret: again(K.oauthClientSecret, c.client_id, c.client_secret, `The secret of OAuth client ${c.client_id}`) } : c,
    ),
    // an ended grant's mark carries no payload
    oauthState: image.oauthState.map((r) => (isSealed(r.payload) ? { ...r, payload: again(K.oauthState, r.id, r.payload, `A stored ${r.model}`) } : r)),
    modelPulls: image.modelPulls.map((p) => (opts.replica && !p.replica ? { ...p, replica: opts.replica } : p)),
  };
  refuseLeftoverSealed(next, made);
  return next;
}

/** Throws when a sealed value is still one of the old key's: a field this copy does not know. */
function refuseLeftoverSealed(image: StoreImage, made: Set<string>): void {
  const visit = (value: unknown, where: string): void => {
    if (isSealed(value) && !made.has(value)) {
      throw new CopyError(`${where} holds a sealed value that svc store copy does not know how to move (a newer svc's store?); nothing was written.`);
    }
    if (value && typeof value === 'object') for (const v of Object.values(value)) visit(v, where);
  };
  for (const [name, value] of Object.entries(image)) visit(value, name === 'meta' || name === 'signingKeys' ? `The store's ${name}` : `A record of ${name}`);
}

/** How many of each are in the image, for the summary. */
export function imageCounts(image: StoreImage): Record<RecordSetName | 'mcpTools', number> {
  const counts = Object.fromEntries(RECORD_SETS.map((name) => [name, image[name].length])) as Record<RecordSetName, number>;
  return { ...counts, mcpTools: image.mcpTools.length };
}

/** The names of the repositories of `repos` that hold anything. */
export async function heldIn(repos: RepositorySet): Promise<string[]> {
  const held: string[] = [];
  // one after the other: inside a transaction there is one connection
  for (const name of RECORD_SETS) if ((await repos[name].count()) > 0) held.push(name);
  if (await repos.meta.get()) held.push('meta');
  if ((await repos.signingKeys.get()) !== undefined) held.push('signingKeys');
  return held;
}

/**
 * Writes the image into `target` as one transaction, after checking in that same transaction
 * that the target holds nothing: all of it becomes durable, or none of it.
 */
export async function writeImage(target: Repositories, image: StoreImage, where: string): Promise<void> {
  await target.transaction(async (r) => {
    const held = await heldIn(r);
    if (held.length > 0) throw new TargetNotEmptyError(where, held);
    for (const name of RECORD_SETS) for (const record of image[name]) await (r[name] as RecordRepository<unknown>).put(record);
    for (const [instanceId, cache] of image.mcpTools) await r.mcpTools.set(instanceId, cache);
    await r.meta.set(image.meta);
    if (image.signingKeys !== undefined) await r.signingKeys.set(image.signingKeys);
  });
}
