import { createHash, randomBytes } from 'node:crypto';
import type Koa from 'koa';
import type { Middleware } from 'koa';
import session from 'koa-session';
import { loginRequired } from '../errors.js';
import type { AppDeps, AppState } from '../http/context.js';
import type { SessionRecord, UserRecord } from '../store/schema.js';

export const SESSION_COOKIE = 'svc_session';
export const SESSION_MAX_AGE_MS = 14 * 24 * 60 * 60 * 1000;

const hashId = (id: string) => createHash('sha256').update(id).digest('base64url');

interface SessionData {
  uid?: string;
  csrf?: string;
  [key: string]: unknown;
}

/**
 * koa-session with its data in the store. Only a hash of each session id is stored, so db.json
 * holds nothing that opens a session; the cookie is HttpOnly, SameSite=Lax and signed with keys
 * that are themselves sealed in the store.
 */
export function sessionMiddleware(app: Koa<AppState>, deps: AppDeps, keys: string[]): Middleware<AppState> {
  app.keys = keys;
  const { repos, clock } = deps;
  const secure = deps.baseUrl().startsWith('https:');
  return session(
    {
      key: SESSION_COOKIE,
      maxAge: SESSION_MAX_AGE_MS,
      httpOnly: true,
      signed: true,
      sameSite: 'lax',
      secure,
      rolling: false,
      renew: false,
      genid: () => randomBytes(32).toString('base64url'),
      store: {
        async get(key: string) {
          const idHash = hashId(key);
          const record = await repos.sessions.get(idHash);
          if (!record || record.expires_at <= clock()) return undefined;
          return { ...record.data, uid: record.user_id, csrf: record.csrf };
        },
        async set(key: string, sess: SessionData, maxAge: number) {
          const idHash = hashId(key);
          const { uid, csrf, ...rest } = sess;
          if (!uid) return; // an anonymous session is not worth a durable write
          const now = clock();
          const record: SessionRecord = {
            id_hash: idHash,
            user_id: uid,
            csrf: csrf ?? randomBytes(24).toString('base64url'),
            expires_at: now + (typeof maxAge === 'number' ? maxAge : SESSION_MAX_AGE_MS),
            data: rest,
          };
          await repos.transaction(async (r) => {
            for (const s of await r.sessions.list()) if (s.expires_at <= now) await r.sessions.delete(s.id_hash);
            await r.sessions.put(record);
          });
        },
        async destroy(key: string) {
          const idHash = hashId(key);
          if (!(await repos.sessions.get(idHash))) return;
          await repos.sessions.delete(idHash);
        },
      },
    } as unknown as Parameters<typeof session>[0],
    app as unknown as Koa,
  ) as unknown as Middleware<AppState>;
}

/** The logged-in user of this request, if any (looked up on every call: a removed user is out at once). */
export async function sessionUser(ctx: Koa.ParameterizedContext<AppState>, deps: AppDeps): Promise<UserRecord | undefined> {
  const uid = (ctx.session as SessionData | null)?.uid;
  if (!uid) return undefined;
  return deps.repos.users.get(uid);
}

export function requireSession(deps: AppDeps): Middleware<AppState> {
  return async function authenticateSession(ctx, next) {
    const user = await sessionUser(ctx, deps);
    if (!user) throw loginRequired();
    ctx.state.user = user;
    await next();
  };
}

/** Starts a fresh session for `user` (a new id, so a planted cookie cannot be fixed in place). */
export async function startSession(ctx: Koa.ParameterizedContext<AppState>, user: UserRecord): Promise<void> {
  const sess = ctx.session as unknown as SessionData & { regenerate: () => Promise<void> };
  sess.uid = user.id;
  sess.csrf = randomBytes(24).toString('base64url');
  await sess.regenerate();
}

export function endSession(ctx: Koa.ParameterizedContext<AppState>): void {
  ctx.session = null;
}

/** The hash this request's session is stored under (see the store above), if it came with one. */
export function sessionIdHash(ctx: Koa.ParameterizedContext<AppState>): string | undefined {
  const id = ctx.cookies.get(SESSION_COOKIE, { signed: true });
  return id ? hashId(id) : undefined;
}

export function csrfToken(ctx: Koa.ParameterizedContext<AppState>): string | undefined {
  return (ctx.session as SessionData | null)?.csrf;
}
