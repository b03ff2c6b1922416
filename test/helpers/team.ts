/**
 * A team server for a test file: a PostgreSQL cluster of its own (started before the file's
 * tests, removed after them), and teams of replicas (real daemons, each with its own data dir) on
 * a new database behind a round-robin balancer. Everything a test starts is stopped after it.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { type Config, Secret } from '../../src/config.js';
import { type Balancer, startBalancer } from './balancer.js';
import { startTestDaemon, type TestDaemon } from './daemon.js';
import { Api } from './http.js';
import { startPostgres, type TestPostgres } from './postgres.js';

export interface Team {
  balancer: Balancer;
  replicas: TestDaemon[];
  database: string;
  /** the admin's password, printed by exactly one replica */
  password: string;
  /** a browser (or app) that talks to the balancer */
  api(): Api;
}

export interface TeamServer {
  /** the file's cluster (started in beforeAll) */
  pg: TestPostgres;
  /** the team's master key, the same for every replica */
  teamKey: string;
  /** what the running test started, stopped in reverse after it */
  running: { stop(): Promise<void> }[];
  /** one replica on `database`, answering to `baseUrl` */
  replica(database: string, baseUrl: string, key?: string, clock?: () => number, config?: Partial<Config>): Promise<TestDaemon>;
  /** `n` replicas started together on a new database (through `through`, a relay, when given), and the balancer in front of them */
  startTeam(n?: number, through?: (url: string) => string, clock?: () => number, config?: Partial<Config>): Promise<Team>;
}

/** Registers the file's hooks; call it at the top of a describe. */
export function useTeamServer(): TeamServer {
  let cluster: TestPostgres | undefined;
  const running: { stop(): Promise<void> }[] = [];
  const teamKey = randomBytes(32).toString('base64url');
  beforeAll(async () => {
    cluster = await startPostgres();
  }, 40_000);
  afterEach(async () => {
    for (const r of running.splice(0).reverse()) await r.stop().catch(() => undefined);
  }, 40_000);
  afterAll(async () => {
    await cluster?.close();
  }, 40_000);
  // the tests name the cluster before beforeAll started it: every use goes to the one started
  const pg = new Proxy({} as TestPostgres, { get: (_, name) => (cluster as unknown as Record<string | symbol, unknown>)[name] });

  const replica: TeamServer['replica'] = async (database, baseUrl, key = teamKey, clock, config = {}) => {
    const d = await startTestDaemon({ clock, config: { database: new Secret(database), masterKey: { value: new Secret(key) }, baseUrl, ...config } });
    running.push(d);
    return d;
  };

  const startTeam: TeamServer['startTeam'] = async (n = 2, through, clock, config) => {
    const created = await pg.createDatabase();
    const database = through ? through(created) : created;
    const balancer = await startBalancer();
    running.push({ stop: () => balancer.close() });
    const replicas = await Promise.all(Array.from({ length: n }, () => replica(database, balancer.url, teamKey, clock, config)));
    balancer.targets.push(...replicas.map((r) => r.url));
    const password = replicas.map((r) => r.initialAdminPassword).find(Boolean) ?? '';
    return { balancer, replicas, database, password, api: () => new Api(balancer.url) };
  };

  return { pg, teamKey, running, replica, startTeam };
}
