import type { AppError } from '../errors.js';
import type { ParameterizedContext } from 'koa';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { SecretBox } from '../store/crypto.js';
import type { Repositories } from '../store/repositories.js';
import type { AccessRequestRecord, AppRole, UserRecord } from '../store/schema.js';

export type Clock = () => number;

/** Everything a feature needs, passed in rather than imported, so tests build a daemon in a few lines. */
export interface AppDeps {
  config: Config;
  repos: Repositories;
  box: SecretBox;
  clock: Clock;
  logger: Logger;
  /** resolved once the server is listening */
  baseUrl: () => string;
  /** random per start, also in daemon.json: how the CLI knows this daemon is its data dir's */
  instanceId?: string;
  /** what this machine's CLI proves a login with; derived from the master key unless given (a team replica's own key) */
  localLoginProof?: string;
}

/** What a verified Bearer credential (a token or an API key) stands on. */
export interface BearerGrant {
  record: AccessRequestRecord;
  user: UserRecord;
  role: AppRole;
  clientId: string;
  /** the resource the credential was issued for; null: every app endpoint */
  audience: string | null;
}

/** What a handler adds to its call's event as it learns it: the model, the tool, the tokens. */
export interface ActivityNote {
  model?: string;
  instance_id?: string;
  mcp_method?: string;
  tool?: string;
  tokens_in?: number;
  tokens_out?: number;
  /** the tokens are svc's estimate (a stream that ended without its usage) */
  tokens_estimated?: boolean;
  /** the upstream answered, but with a failure (a JSON-RPC error) */
  failed?: boolean;
  /** svc said no in an answer of the protocol's own (a tool outside the allow-list): the reason */
  refused?: string;
  /** the other messages of a JSON-RPC batch: each is an event of its own, with this one's outcome */
  more?: { mcp_method?: string; tool?: string }[];
}

/** The grant a refused credential named, when its signature held (a revoked grant's token). */
export interface AttemptedGrant {
  accessRequestId: string;
  clientId: string;
}

export interface AppState {
  user?: UserRecord;
  /** the verified grant of a Bearer call */
  grant?: BearerGrant;
  /** a request id for log correlation */
  requestId: string;
  /** set by the router when the matched route answers with an open-ended stream (RouteDef.stream) */
  stream?: boolean;
  /**
   * Set by a handler that took its response over for an open-ended stream and returned before the
   * stream ends (see `afterAnswer`): settles once the stream is over.
   */
  streamEnded?: Promise<void>;
  /**
   * Counts `n` more calls of this request against the grant's calls a minute (the messages of a
   * JSON-RPC batch after its first), or throws the limit's 429; set only where a limit applies.
   */
  takeCalls?: (n: number) => Promise<void>;
  /** an app call's event as it is being learnt (the model, the tool, the tokens) */
  activity?: ActivityNote;
  /**
   * Set on a call of a grant with a tokens-a-day limit: reserves what the call may spend before
   * it goes upstream (its input, estimated, and the output it allows itself, or null for no cap),
   * and throws the 429 when the day's budget cannot hold it.
   */
  tokenBudget?: { reserve(tokensIn: number, tokensOut: number | null): Promise<void> };
  /**
   * The error body of the route's wire format, when it is not svc's (OpenAI's) own: set first
   * in the chain for those paths, so errors thrown before the handler (a 401, a 429, a body too
   * big) are in that shape too. The error middleware reads it.
   */
  errorBody?: (error: AppError) => unknown;
  /** the grant a refused credential named, for the activity */
  attempted?: AttemptedGrant | Promise<AttemptedGrant | undefined>;
}

export type AppContext = ParameterizedContext<AppState>;

/**
 * Sets a path's own error shape (AppState.errorBody) and what goes with it, once the request has
 * its id and before anything can fail; the request's tagging runs each.
 */
export type ErrorShape = (ctx: AppContext) => void;

/**
 * Runs `work` once the request is answered: at once, or, when the handler left an open-ended
 * stream running (an MCP host's GET stream, open all day), once that stream ends. A stream then
 * holds no suspended frame of the middleware it passed through (each one about half a KiB, a
 * dozen of them, for every open stream), only this work.
 */
export function afterAnswer(ctx: { state: Pick<AppState, 'streamEnded'> }, work: () => void): void {
  const ended = ctx.state.streamEnded;
  if (ended) void ended.then(work, work);
  else work();
}
