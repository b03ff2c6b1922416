import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Agent, type Dispatcher } from 'undici';
import { z } from 'zod';
import { AppError, conflict, notFound } from '../errors.js';
import { addressAllowed, guardedLookup, literalAddress, parseNetworks } from '../http/address-policy.js';
import type { Clock } from '../http/context.js';
import { httpUrl } from '../http/urls.js';
import type { Logger } from '../log.js';
import type { PullRecord } from '../store/records.js';
import type { Repositories } from '../store/repositories.js';
import { pullStatuses } from '../store/vocabulary.js';

export { pullStatuses } from '../store/vocabulary.js';

export type { PullRecord } from '../store/records.js';

/** Who asks: the user behind the session or the app token, and which of the two it is. */
export interface PullActor {
  userId: string;
  app: boolean;
  /** an admin's own session also sees downloads that have no owner (made before owners were kept) */
  adminSession: boolean;
}

export interface DownloadOptions {
  /** bytes each user's downloads may take on disk; 0 = no limit */
  quotaBytes: number;
  /** non-public networks that downloads started by apps may still reach */
  allowNetworks: string[];
  /**
   * On a team server, the replica this is (replicaOf): a download's file is on the replica that
   * started it, so only that one picks it back up after a restart.
   */
  replica?: string;
}

/** A team replica's name for its downloads, the same across its restarts: its host and data dir. */
export const replicaOf = (host: string, dataDir: string) => createHash('sha256').update(`${host}\0${path.resolve(dataDir)}`).digest('base64url').slice(0, 16);


/** A plain file name: no separators, no leading dot, nothing that could leave the models folder. */
export const modelFilename = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/, 'a file name is letters, digits and . _ + - (no slashes, no leading dot)')
  .refine((n) => !n.endsWith('.part'), 'may not end in .part');

export const pullBody = z.strictObject({
  url: httpUrl,
  filename: modelFilename.optional(),
  sha256: z
    .string()
    .regex(/^[A-Fa-f0-9]{64}$/, 'must be 64 hex digits')
    .transform((s) => s.toLowerCase())
    .optional(),
});

export const pullJob = z
  .object({
    id: z.string(),
    url: z.string(),
    filename: z.string(),
    sha256: z.string().nullable(),
    status: z.enum(pullStatuses),
    bytes_done: z.number().nullable().describe('null for app callers'),
    bytes_total: z.number().nullable(),
    error: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({
    id: 'ModelPull',
    description:
      'An app token sees only its own user\'s downloads and no more than their outcome: status queued, downloading, done or failed, the sha256 it gave (else null), no sizes and a generic error.',
  });
export type PullView = z.infer<typeof pullJob>;

const PROGRESS_EVERY_MS = 1000;
const MAX_REDIRECTS = 5;
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const GIB = 2 ** 30;
const formatSize = (n: number) => (n >= GIB ? `${+(n / GIB).toFixed(2)} GiB` : `${+(n / 2 ** 20).toFixed(1)} MiB`);

/**
 * Model file downloads into `<data-dir>/models`: resumable (a `.part` file and HTTP Range, also
 * across a daemon restart), checksum verified, and confined to that folder. Each download belongs
 * to its user, who alone sees it; each user's downloads share a disk quota. Downloads started by
 * an app token reach only public addresses (checked on the resolved address at connect time and
 * on every redirect), and the app learns no more than whether they succeeded.
 */
export class ModelDownloads {
  readonly dir: string;
  private readonly running = new Map<string, { abort: AbortController; userId: string | null; filename: string }>();
  private readonly live = new Map<string, number>();
  /** connections for the person's own downloads, and guarded ones for apps' (never shared) */
  private readonly personAgent: Agent;
  private readonly appAgent: Agent;
  private readonly allowed;

  constructor(
    dataDir: string,
    private readonly repos: Repositories,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: DownloadOptions = { quotaBytes: 0, allowNetworks: [] },
  ) {
    this.dir = path.join(dataDir, 'models');
    this.allowed = options.allowNetworks.length > 0 ? parseNetworks(options.allowNetworks) : null;
    this.personAgent = new Agent({ connect: { timeout: 30_000 } });
    this.appAgent = new Agent({ connect: { timeout: 30_000, lookup: guardedLookup(this.allowed) } });
  }

  private now() {
    return new Date(this.clock()).toISOString();
  }

  private fileFor(filename: string): string {
    const file = path.join(this.dir, filename);
    if (path.dirname(file) !== this.dir) throw new AppError('invalid_body', 'filename must stay inside the models folder.', { param: 'filename' });
    return file;
  }

  private visibleTo(p: PullRecord, actor: PullActor): boolean {
    return p.user_id ? p.user_id === actor.userId : actor.adminSession;
  }

  async list(actor: PullActor): Promise<PullView[]> {
    return (await this.repos.modelPulls.list())
      .filter((p) => this.visibleTo(p, actor))
      .map((p) => this.view(p, actor));
  }

  async get(id: string, actor: PullActor): Promise<PullView> {
    const found = await this.repos.modelPulls.get(id);
    if (!found || !this.visibleTo(found, actor)) throw notFound('No such download.');
    return this.view(found, actor);
  }

  /** What the caller may see: everything for the person, only the outcome for an app. */
  view(p: PullRecord, actor: PullActor): PullView {
    const { user_id: _u, by_app: _b, expected_sha256: _e, replica: _r, ...rest } = this.withLiveProgress(p);
    if (!actor.app) return rest;
    const final = p.status === 'done' || p.status === 'failed';
    return {
      id: p.id,
      url: p.url,
      filename: p.filename,
      sha256: p.expected_sha256 ?? null,
      status: final ? p.status : p.status === 'queued' ? 'queued' : 'downloading',
      bytes_done: null,
      bytes_total: null,
      error: p.status === 'failed' ? 'the download failed' : null,
      created_at: p.created_at,
      updated_at: final ? p.updated_at : p.created_at,
    };
  }

  private withLiveProgress(p: PullRecord): PullRecord {
    const live = this.live.get(p.id);
    return live === undefined ? p : { ...p, bytes_done: live };
  }

  async start(input: z.output<typeof pullBody>, actor: PullActor): Promise<PullRecord> {
    const url = new URL(input.url);
    let fromUrl = '';
    try {
      fromUrl = decodeURIComponent(url.pathname.split('/').pop() ?? '');
    } catch {
      // a malformed % escape: no name can be taken from the URL
    }
    const filename = input.filename ?? fromUrl;
    if (!modelFilename.safeParse(filename).success) {
      throw new AppError('invalid_body', 'Cannot take a safe file name from the URL; pass filename.', { param: 'filename' });
    }
    const literal = literalAddress(url);
    if (actor.app && literal && !addressAllowed(literal, this.allowed)) {
      throw new AppError('address_not_allowed', 'An app may download only from public addresses.', { param: 'url' });
    }
    const file = this.fileFor(filename);
    if (await stat(file).then(() => true, () => false)) throw conflict('file_exists', `${filename} is already in the models folder.`);
    const quota = this.options.quotaBytes;
    if (quota > 0 && (await this.usage(actor.userId, null, filename)) >= quota) {
      throw conflict('download_quota_exceeded', `Your downloads already take your quota of ${formatSize(quota)}; remove some files from the models folder first.`);
    }
    const record: PullRecord = {
      id: randomUUID(),
      url: input.url,
      filename,
      sha256: input.sha256 ?? null,
      status: 'queued',
      bytes_done: 0,
      bytes_total: null,
      error: null,
      created_at: this.now(),
      updated_at: this.now(),
      user_id: actor.userId,
      by_app: actor.app,
      expected_sha256: input.sha256 ?? null,
      ...(this.options.replica ? { replica: this.options.replica } : {}),
    };
    await this.repos.transaction(async (repos) => {
      if ((await repos.modelPulls.list()).some((p) => p.filename === filename && (p.status === 'queued' || p.status === 'downloading' || p.status === 'verifying'))) {
        throw conflict('download_in_progress', `${filename} is already being downloaded.`);
      }
      await repos.modelPulls.put(record);
    });
    this.run(record);
    return record;
  }

  /**
   * Bytes a user's downloads take on disk, leaving out `excludeId` and the file `filename` (the
   * download being checked, whose own bytes the caller adds): finished files and kept `.part`
   * files as they are on disk, running downloads as far as they got.
   */
  private async usage(userId: string | null, excludeId: string | null, filename: string): Promise<number> {
    if (!userId) return 0;
    const latest = new Map<string, PullRecord>();
    for (const p of await this.repos.modelPulls.list()) if (p.user_id === userId && p.id !== excludeId && p.filename !== filename) latest.set(p.filename, p);
    let total = 0;
    for (const p of latest.values()) {
      // running, unless it has just been marked done or failed (then the disk is the truth)
      if (this.running.has(p.id) && p.status !== 'done' && p.status !== 'failed') {
        total += this.live.get(p.id) ?? p.bytes_done;
        continue;
      }
      const file = path.join(this.dir, p.filename);
      total += await stat(p.status === 'done' ? file : `${file}.part`).then((st) => st.size, () => 0);
    }
    return total;
  }

  /** Picks unfinished downloads back up after a restart (on a team server, this replica's own). */
  async resumeAll(): Promise<void> {
    for (const p of await this.repos.modelPulls.list()) {
      if ((p.status === 'queued' || p.status === 'downloading' || p.status === 'verifying') && (p.replica ?? null) === (this.options.replica ?? null)) this.run(p);
    }
  }

  async stop(): Promise<void> {
    for (const r of this.running.values()) r.abort.abort();
    this.running.clear();
    await Promise.all([this.personAgent.close(), this.appAgent.close()]).catch(() => undefined);
  }

  private async patch(id: string, fields: Partial<PullRecord>): Promise<void> {
    await this.repos.modelPulls.update(id, (p) => {
      Object.assign(p, fields, { updated_at: this.now() });
    });
  }

  private async record(id: string): Promise<PullRecord> {
    const found = await this.repos.modelPulls.get(id);
    if (!found) throw notFound('No such download.');
    return found;
  }

  private run(job: PullRecord): void {
    const id = job.id;
    if (this.running.has(id)) return;
    const abort = new AbortController();
    this.running.set(id, { abort, userId: job.user_id ?? null, filename: job.filename });
    this.download(id, abort.signal)
      .catch(async (err) => {
        if (abort.signal.aborted) return;
        const message = err instanceof AppError ? err.message : 'the download failed';
        this.logger.warn({ download: id, reason: (err as Error)?.message }, 'model download failed');
        await this.patch(id, { status: 'failed', error: message }).catch(() => undefined);
      })
      .finally(() => {
        this.running.delete(id);
        this.live.delete(id);
      });
  }

  /**
   * GET `job.url`, following up to 5 redirects. For an app's download every hop is checked: an IP
   * literal here, a host name by the guarded lookup when the connection is made.
   */
  private async fetch(job: PullRecord, headers: Record<string, string>, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    const agent = job.by_app ? this.appAgent : this.personAgent;
    let url = new URL(job.url);
    for (let hop = 0; ; hop++) {
      const literal = literalAddress(url);
      if (job.by_app && literal && !addressAllowed(literal, this.allowed)) throw new AppError('address_not_allowed', 'The download leads to an address that is not public.');
      let res: Dispatcher.ResponseData;
      try {
        res = await agent.request({ origin: url.origin, path: `${url.pathname}${url.search}`, method: 'GET', headers, signal, headersTimeout: 60_000, bodyTimeout: 60_000 });
      } catch (err) {
        if (signal.aborted) throw err;
        const e = err as { code?: string; cause?: { code?: string } };
        if (e.code === 'ESVC_BLOCKED_ADDRESS' || e.cause?.code === 'ESVC_BLOCKED_ADDRESS') throw new AppError('address_not_allowed', 'The download leads to an address that is not public.');
        if (e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_CONNECT_TIMEOUT') throw new AppError('upstream_timeout', 'The server did not answer in time.');
        throw new AppError('upstream_unavailable', 'The server could not be reached.');
      }
      const location = res.headers.location;
      if (!REDIRECTS.has(res.statusCode) || typeof location !== 'string') return res;
      await res.body.dump().catch(() => undefined);
      if (hop >= MAX_REDIRECTS) throw new AppError('upstream_unavailable', 'The server redirected too many times.');
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new AppError('upstream_unavailable', 'The server redirected to an invalid URL.');
      }
      if (next.protocol !== 'http:' && next.protocol !== 'https:') throw new AppError('upstream_unavailable', 'The server redirected to a URL that is not http(s).');
      url = next;
    }
  }

  private async download(id: string, signal: AbortSignal): Promise<void> {
    const job = await this.record(id);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const file = this.fileFor(job.filename);
    const part = `${file}.part`;
    const have = await stat(part).then((s) => s.size, () => 0);
    const res = await this.fetch(job, have > 0 ? { Range: `bytes=${have}-` } : {}, signal);
    const status = res.statusCode;
    if (status !== 200 && status !== 206) {
      await res.body.dump().catch(() => undefined);
      throw new AppError('upstream_unavailable', `The server answered ${status}.`);
    }
    const resumed = status === 206 && have > 0;
    const start = resumed ? have : 0;
    const length = Number(res.headers['content-length']);
    const total = Number.isFinite(length) ? start + length : null;
    const quota = this.options.quotaBytes;
    const userId = job.user_id ?? null;
    let others = quota > 0 ? await this.usage(userId, id, job.filename) : 0;
    const overQuota = (bytes: number) => quota > 0 && userId !== null && others + bytes > quota;
    if (total !== null && overQuota(total)) {
      res.body.destroy();
      await unlink(part).catch(() => undefined);
      throw new AppError('download_quota_exceeded', `The file (${formatSize(total)}) would exceed your download quota of ${formatSize(quota)}.`);
    }
    const hash = createHash('sha256');
    if (resumed) for await (const chunk of createReadStream(part, { end: have - 1 })) hash.update(chunk as Buffer);
    await this.patch(id, { status: 'downloading', bytes_done: start, bytes_total: total, error: null });

    const handle = await open(part, resumed ? 'a' : 'w', 0o600);
    let done = start;
    let lastSaved = this.clock();
    let exceeded = false;
    try {
      for await (const chunk of res.body) {
        const buf = chunk as Buffer;
        if (overQuota(done + buf.length)) {
          exceeded = true;
          res.body.destroy();
          break;
        }
        hash.update(buf);
        await handle.write(buf);
        done += buf.length;
        this.live.set(id, done);
        if (this.clock() - lastSaved > PROGRESS_EVERY_MS) {
          lastSaved = this.clock();
          await this.patch(id, { bytes_done: done });
          if (quota > 0) others = await this.usage(userId, id, job.filename);
        }
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (exceeded) {
      await unlink(part).catch(() => undefined);
      throw new AppError('download_quota_exceeded', `The download would exceed your download quota of ${formatSize(quota)}.`);
    }
    if (total !== null && done !== total) throw new AppError('upstream_unavailable', 'The download broke off; it resumes when retried.');

    await this.patch(id, { status: 'verifying', bytes_done: done, bytes_total: done });
    const digest = hash.digest('hex');
    if (job.sha256 && digest !== job.sha256) {
      await unlink(part).catch(() => undefined);
      await this.patch(id, { status: 'failed', error: `checksum mismatch: got sha256 ${digest}` });
      return;
    }
    await rename(part, file);
    await this.patch(id, { status: 'done', sha256: digest, error: null });
    this.logger.info({ download: id, bytes: done }, 'model download finished');
  }
}
