import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { AppError, conflict, notFound } from '../errors.js';
import type { Clock } from '../http/context.js';
import { httpUrl } from '../http/urls.js';
import type { Logger } from '../log.js';
import { callUpstream } from '../proxy/upstream.js';
import type { Db } from '../store/schema.js';
import type { Store } from '../store/store.js';

export const pullStatuses = ['queued', 'downloading', 'verifying', 'done', 'failed'] as const;

export interface PullRecord {
  id: string;
  url: string;
  filename: string;
  sha256: string | null;
  status: (typeof pullStatuses)[number];
  bytes_done: number;
  bytes_total: number | null;
  error: string | null;
  created_at: string;
  updated_at: string;
}

const pullsOf = (db: Db): PullRecord[] => db.model_pulls as PullRecord[];

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
    bytes_done: z.number(),
    bytes_total: z.number().nullable(),
    error: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'ModelPull' });

const PROGRESS_EVERY_MS = 1000;

/**
 * Model file downloads into `<data-dir>/models`: resumable (a `.part` file and HTTP Range, also
 * across a daemon restart), checksum verified, and confined to that folder.
 */
export class ModelDownloads {
  readonly dir: string;
  private readonly running = new Map<string, AbortController>();
  private readonly live = new Map<string, number>();

  constructor(
    dataDir: string,
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {
    this.dir = path.join(dataDir, 'models');
  }

  private now() {
    return new Date(this.clock()).toISOString();
  }

  private fileFor(filename: string): string {
    const file = path.join(this.dir, filename);
    if (path.dirname(file) !== this.dir) throw new AppError(400, 'invalid_request_error', 'invalid_body', 'filename must stay inside the models folder.', { param: 'filename' });
    return file;
  }

  list(): PullRecord[] {
    return this.store.read((db) => pullsOf(db)).map((p) => this.withLiveProgress(p));
  }

  get(id: string): PullRecord {
    const found = this.store.read((db) => pullsOf(db).find((p) => p.id === id));
    if (!found) throw notFound('No such download.');
    return this.withLiveProgress(found);
  }

  private withLiveProgress(p: PullRecord): PullRecord {
    const live = this.live.get(p.id);
    return live === undefined ? p : { ...p, bytes_done: live };
  }

  async start(input: z.output<typeof pullBody>): Promise<PullRecord> {
    const fromUrl = decodeURIComponent(new URL(input.url).pathname.split('/').pop() ?? '');
    const filename = input.filename ?? fromUrl;
    if (!modelFilename.safeParse(filename).success) {
      throw new AppError(400, 'invalid_request_error', 'invalid_body', 'Cannot take a safe file name from the URL; pass filename.', { param: 'filename' });
    }
    const file = this.fileFor(filename);
    if (await stat(file).then(() => true, () => false)) throw conflict('file_exists', `${filename} is already in the models folder.`);
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
    };
    await this.store.update((db) => {
      if (pullsOf(db).some((p) => p.filename === filename && (p.status === 'queued' || p.status === 'downloading' || p.status === 'verifying'))) {
        throw conflict('download_in_progress', `${filename} is already being downloaded.`);
      }
      pullsOf(db).push(record);
    });
    this.run(record.id);
    return record;
  }

  /** Picks unfinished downloads back up after a restart. */
  resumeAll(): void {
    for (const p of this.store.read((db) => pullsOf(db))) if (p.status === 'queued' || p.status === 'downloading' || p.status === 'verifying') this.run(p.id);
  }

  async stop(): Promise<void> {
    for (const c of this.running.values()) c.abort();
    this.running.clear();
  }

  private async patch(id: string, fields: Partial<PullRecord>): Promise<void> {
    await this.store.update((db) => {
      const p = pullsOf(db).find((x) => x.id === id);
      if (p) Object.assign(p, fields, { updated_at: this.now() });
    });
  }

  private run(id: string): void {
    if (this.running.has(id)) return;
    const abort = new AbortController();
    this.running.set(id, abort);
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

  private async download(id: string, signal: AbortSignal): Promise<void> {
    const job = this.get(id);
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const file = this.fileFor(job.filename);
    const part = `${file}.part`;
    const have = await stat(part).then((s) => s.size, () => 0);
    const res = await callUpstream({
      url: new URL(job.url),
      method: 'GET',
      headers: have > 0 ? { Range: `bytes=${have}-` } : {},
      timeoutMs: 60_000,
      signal,
    });
    const status = res.statusCode ?? 0;
    if (status !== 200 && status !== 206) {
      res.body.resume();
      throw new AppError(502, 'upstream_error', 'upstream_unavailable', `The server answered ${status}.`);
    }
    const resumed = status === 206 && have > 0;
    const start = resumed ? have : 0;
    const length = Number(res.headers['content-length']);
    const total = Number.isFinite(length) ? start + length : null;
    const hash = createHash('sha256');
    if (resumed) for await (const chunk of createReadStream(part, { end: have - 1 })) hash.update(chunk as Buffer);
    await this.patch(id, { status: 'downloading', bytes_done: start, bytes_total: total, error: null });

    const handle = await open(part, resumed ? 'a' : 'w', 0o600);
    let done = start;
    let lastSaved = this.clock();
    try {
      for await (const chunk of res.body) {
        const buf = chunk as Buffer;
        hash.update(buf);
        await handle.write(buf);
        done += buf.length;
        this.live.set(id, done);
        if (this.clock() - lastSaved > PROGRESS_EVERY_MS) {
          lastSaved = this.clock();
          await this.patch(id, { bytes_done: done });
        }
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (total !== null && done !== total) throw new AppError(502, 'upstream_error', 'upstream_unavailable', 'The download broke off; it resumes when retried.');

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
