import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { type Config, resolveConfig } from '../../src/config.js';
import { type Daemon, startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import type { Keychain } from '../../src/store/master-key.js';

/** A clock tests can move: `clock.advance(ms)`. */
export function testClock(start = Date.now()) {
  let now = start;
  const clock = () => now;
  clock.advance = (ms: number) => {
    now += ms;
  };
  clock.set = (t: number) => {
    now = t;
  };
  return clock;
}

/** A keychain that never answers, as on a headless machine without a Secret Service. */
export const noKeychain: Keychain = {
  get: async () => {
    throw new Error('no secret service');
  },
  set: async () => {
    throw new Error('no secret service');
  },
};

export interface TestDaemon extends Daemon {
  dataDir: string;
  logs: string[];
  notices: string[];
  adminPassword: string;
  /** closes the daemon and removes its data dir */
  stop(): Promise<void>;
}

export async function tempDir(prefix = 'svc-test-'): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), prefix));
}

/** The real daemon on 127.0.0.1 port 0 with a temp data dir; logs and notices are captured. */
export async function startTestDaemon(
  opts: { dataDir?: string; clock?: () => number; keychain?: Keychain; config?: Partial<Config> } = {},
): Promise<TestDaemon> {
  const dataDir = opts.dataDir ?? (await tempDir());
  const config = { ...resolveConfig({ host: '127.0.0.1', port: 0, dataDir, keychain: 'file', logLevel: 'debug' }, {}), ...opts.config };
  const logs: string[] = [];
  const notices: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const daemon = await startDaemon({
    config,
    clock: opts.clock,
    keychain: opts.keychain ?? noKeychain,
    logger: createLogger(config.logLevel, sink),
    notify: (line) => {
      notices.push(line);
    },
  });
  return Object.assign(daemon, {
    dataDir,
    logs,
    notices,
    adminPassword: daemon.initialAdminPassword ?? '',
    async stop() {
      await daemon.close();
      if (!opts.dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  });
}
