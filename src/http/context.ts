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

export interface AppState {
  user?: UserRecord;
  /** the verified grant of a Bearer call */
  grant?: BearerGrant;
  /** a request id for log correlation */
  requestId: string;
  /** set by the router when the matched route answers with an open-ended stream (RouteDef.stream) */
  stream?: boolean;
}

export type AppContext = ParameterizedContext<AppState>;
