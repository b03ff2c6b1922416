import { forbidden, loginRequired } from '../errors.js';
import type { Middleware } from 'koa';
import type { AppDeps, AppState } from '../http/context.js';
import { type AnyRouteDef, defineRoute } from '../http/route.js';
import { LOCAL_LOGIN_HEADER, type LoginService } from './login.js';
import { atLeast } from './roles.js';
import type { LoginLinks } from './login-links.js';
import { createUserBody, loginBody, loginLink, setPasswordBody, setRoleBody, userList, usernameParams, userResponse } from './schemas.js';
import { endSession, sessionIdHash, startSession } from './sessions.js';
import { toPublicUser, type UsersService } from './users.js';

export function authRoutes(deps: AppDeps, users: UsersService, login: LoginService, sameOrigin: Middleware<AppState>, links: LoginLinks): AnyRouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/svc/v1/auth/login',
      operationId: 'login',
      summary: 'Log in with a local account; sets the session cookie',
      description:
        'Failures back off per (username, address): after 5, each one blocks that pair for a delay that doubles (1 s up to 15 min), answered 429 with Retry-After. The svc CLI on the daemon\'s machine also sends X-Svc-Local-Login (derived from the master key), and its logins count apart, so guesses from other local processes never lock it out.',
      tags: ['auth'],
      auth: 'none',
      before: [sameOrigin],
      body: loginBody,
      responses: { 200: { description: 'Logged in', schema: userResponse } },
      errors: [400, 401, 403, 429],
      async handler(ctx, { body }) {
        const user = await login.authenticate(body.username, body.password, ctx.ip, { localCli: login.isLocalCli(ctx.get(LOCAL_LOGIN_HEADER) || undefined) });
        await startSession(ctx, user);
        deps.logger.info({ user: user.id }, 'login');
        return { user: toPublicUser(user) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/auth/logout',
      operationId: 'logout',
      summary: 'End the current session',
      tags: ['auth'],
      auth: 'none',
      before: [sameOrigin],
      responses: { 204: { description: 'Logged out' } },
      errors: [403],
      handler(ctx) {
        endSession(ctx);
        ctx.status = 204;
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/auth/me',
      operationId: 'me',
      summary: 'The logged-in user',
      tags: ['auth'],
      auth: 'session',
      responses: { 200: { description: 'The user of this session', schema: userResponse } },
      errors: [401],
      handler: (ctx) => ({ user: toPublicUser(ctx.state.user!) }),
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/auth/login-links',
      operationId: 'createLoginLink',
      summary: 'A one-time link that signs a browser in as you and opens the home page (svc open)',
      description: 'The link works once, within 60 seconds, on any replica of a team server, and only while the session that made it lasts (a logout or password change ends it); a used or expired one signs nobody in. It works when the person opens it, not when another site sends the browser to it. It is sealed with the master key, not stored; its use is stored until it expires.',
      tags: ['auth'],
      auth: 'session',
      responses: { 201: { description: 'The link', schema: loginLink } },
      errors: [401, 403],
      handler(ctx) {
        // a session call always comes with its cookie; the link is tied to that session
        const session = sessionIdHash(ctx);
        if (!session) throw loginRequired();
        const { token, expiresAt } = links.mint(ctx.state.user!.id, session);
        const url = new URL('/ui/login-link', deps.baseUrl());
        url.searchParams.set('token', token);
        deps.logger.info({ user: ctx.state.user!.id }, 'login link made');
        ctx.status = 201;
        return { url: url.href, expires_at: new Date(expiresAt).toISOString() };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/svc/v1/users',
      operationId: 'listUsers',
      summary: 'List local accounts (manager or admin)',
      tags: ['users'],
      auth: 'session',
      responses: { 200: { description: 'Users', schema: userList } },
      errors: [401, 403],
      async handler(ctx) {
        const actor = ctx.state.user!;
        if (!atLeast(actor.role, 'manager')) throw forbidden('Only a manager or an admin can list users.');
        return { data: (await users.list()).map((u) => ({ ...toPublicUser(u), created_at: u.created_at })) };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/svc/v1/users',
      operationId: 'createUser',
      summary: 'Create a local account (manager or admin; only an admin creates admins)',
      tags: ['users'],
      auth: 'session',
      body: createUserBody,
      responses: { 201: { description: 'Created', schema: userResponse } },
      errors: [400, 401, 403, 409],
      async handler(ctx, { body }) {
        const user = await users.create(ctx.state.user!, body);
        ctx.status = 201;
        return { user: toPublicUser(user) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/svc/v1/users/{username}/role',
      operationId: 'setUserRole',
      summary: "Change a user's role",
      tags: ['users'],
      auth: 'session',
      params: usernameParams,
      body: setRoleBody,
      responses: { 200: { description: 'Changed', schema: userResponse } },
      errors: [400, 401, 403, 404, 409],
      async handler(ctx, { params, body }) {
        return { user: toPublicUser(await users.setRole(ctx.state.user!, params.username, body.role)) };
      },
    }),
    defineRoute({
      method: 'put',
      path: '/svc/v1/users/{username}/password',
      operationId: 'setUserPassword',
      summary: "Set a user's password (your own, or as manager or admin); ends that user's sessions",
      tags: ['users'],
      auth: 'session',
      params: usernameParams,
      body: setPasswordBody,
      responses: { 204: { description: 'Changed' } },
      errors: [400, 401, 403, 404],
      async handler(ctx, { params, body }) {
        await users.setPassword(ctx.state.user!, params.username, body.password);
        ctx.status = 204;
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/svc/v1/users/{username}',
      operationId: 'removeUser',
      summary: 'Remove a user, their sessions and MCP instances; their approved grants are revoked',
      tags: ['users'],
      auth: 'session',
      params: usernameParams,
      responses: { 204: { description: 'Removed' } },
      errors: [401, 403, 404, 409],
      async handler(ctx, { params }) {
        await users.remove(ctx.state.user!, params.username);
        ctx.status = 204;
      },
    }),
  ];
}
