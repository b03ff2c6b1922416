import type { AliasRecord, OAuthClientRecord, OAuthStateRecord, ProviderRecord, PullRecord, ToolCache } from './records.js';
import type { AccessRequestRecord, ApiKeyRecord, DbMeta, McpInstanceRecord, SessionRecord, UserRecord } from './schema.js';

/**
 * The store's collections, each a set of records under a key.
 */
export interface CollectionRecords {
  users: UserRecord;
  sessions: SessionRecord;
  mcp_instances: McpInstanceRecord;
  access_requests: AccessRequestRecord;
  api_keys: ApiKeyRecord;
  oauth_clients: OAuthClientRecord;
  oauth_state: OAuthStateRecord;
  providers: ProviderRecord;
  model_aliases: AliasRecord;
  model_pulls: PullRecord;
  /** keyed by MCP instance id; stored as an object, not an array */
  mcp_tools: ToolCache;
}

export type CollectionName = keyof CollectionRecords;

/** Single values stored whole (`meta`, the sealed signing keys); unknown ones are kept as they are. */
export interface DocValues {
  meta: DbMeta | null;
  oauth_keys: string | undefined;
}
export type DocName = keyof DocValues;

const keyed =
  <N extends CollectionName>(field: string) =>
  (rec: CollectionRecords[N]) =>
    String((rec as unknown as Record<string, unknown>)[field]);

/** How each collection names its records; `null`: the key is given with each put (an object on disk). */
export const COLLECTION_KEYS: { [N in CollectionName]: ((rec: CollectionRecords[N]) => string) | null } = {
  users: keyed('id'),
  sessions: keyed('id_hash'),
  mcp_instances: keyed('id'),
  access_requests: keyed('id'),
  api_keys: keyed('id'),
  oauth_clients: keyed('client_id'),
  oauth_state: (rec) => `${rec.model}:${rec.id}`,
  providers: keyed('name'),
  model_aliases: keyed('id'),
  model_pulls: keyed('id'),
  mcp_tools: null,
};

export const COLLECTIONS = Object.keys(COLLECTION_KEYS) as CollectionName[];

export const isCollection = (name: string): name is CollectionName => Object.hasOwn(COLLECTION_KEYS, name);

/** Records are values: nobody may change one in place, only put a new one (`Tx.edit` copies). */
export function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * What a feature reads: the durable (committed) records only. Returned records are frozen in
 * tests and must never be changed in place anywhere.
 */
export interface StoreReader {
  get<N extends CollectionName, T = CollectionRecords[N]>(collection: N, key: string): T | undefined;
  /** every record, in the order they were first stored */
  all<N extends CollectionName, T = CollectionRecords[N]>(collection: N): T[];
  /** how many records */
  count(collection: CollectionName): number;
  doc<D extends DocName>(name: D): DocValues[D];
}

/**
 * One atomic change: reads see the latest data (durable plus every change still being written)
 * and this transaction's own changes; if the function throws, nothing of it is kept.
 */
export interface Tx extends StoreReader {
  /** a record stored anew or replacing the one under its key */
  put<N extends CollectionName, T = CollectionRecords[N]>(collection: N, record: T, key?: string): T;
  delete(collection: CollectionName, key: string): void;
  /** a writable copy of a record, stored at the end of the transaction with whatever was changed on it */
  edit<N extends CollectionName, T = CollectionRecords[N]>(collection: N, key: string): T | undefined;
  setDoc<D extends DocName>(name: D, value: DocValues[D]): void;
  /**
   * The records of `collection` changed but not yet durable (by earlier transactions still being
   * written, and by this one): what an index of durable records lacks. undefined: deleted.
   */
  changed<N extends CollectionName, T = CollectionRecords[N]>(collection: N): [string, T | undefined][];
}

/** One change as the journal carries it. */
export type Op = ['p', CollectionName, string, unknown] | ['d', CollectionName, string] | ['s', string, unknown];
