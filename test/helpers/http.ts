/** A tiny HTTP client with a cookie jar, for driving the daemon as a browser or script would. */
export interface ApiResponse<T = any> {
  status: number;
  body: T;
  headers: Headers;
  text: string;
}

export class Api {
  private cookies = new Map<string, string>();

  constructor(readonly baseUrl: string) {}

  get cookieHeader(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }

  /** Keeps (or with null, drops) a cookie set outside `request`, as a browser keeps every cookie it is given. */
  keepCookie(name: string, value: string | null): void {
    if (value) this.cookies.set(name, value);
    else this.cookies.delete(name);
  }

  async request<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse<T>> {
    const h: Record<string, string> = { ...headers };
    if (body !== undefined && !h['Content-Type']) h['Content-Type'] = 'application/json';
    if (this.cookies.size > 0 && !h.Cookie) h.Cookie = this.cookieHeader;
    const res = await fetch(new URL(path, this.baseUrl), {
      method,
      headers: h,
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      redirect: 'manual',
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const value = pair.slice(at + 1).trim();
      const expired = attrs.some((a) => /expires=Thu, 01 Jan 1970/i.test(a)) || value === '';
      if (expired) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed as T, headers: res.headers, text };
  }

  get<T = any>(path: string, headers?: Record<string, string>) {
    return this.request<T>('GET', path, undefined, headers);
  }
  post<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('POST', path, body, headers);
  }
  put<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('PUT', path, body, headers);
  }
  patch<T = any>(path: string, body?: unknown, headers?: Record<string, string>) {
    return this.request<T>('PATCH', path, body, headers);
  }
  delete<T = any>(path: string, headers?: Record<string, string>) {
    return this.request<T>('DELETE', path, undefined, headers);
  }

  async login(username: string, password: string): Promise<this> {
    const res = await this.post('/svc/v1/auth/login', { username, password });
    if (res.status !== 200) throw new Error(`login as ${username} failed: ${res.status} ${res.text}`);
    return this;
  }
}

/** Logs in as admin and creates a user with the given role; answers that user's Api. */
export async function userApi(baseUrl: string, admin: Api, username: string, role: 'user' | 'power_user' | 'manager' | 'admin'): Promise<Api> {
  const password = `pw-${username}-12345`;
  const res = await admin.post('/svc/v1/users', { username, role, password });
  if (res.status !== 201) throw new Error(`create ${username}: ${res.status} ${res.text}`);
  return new Api(baseUrl).login(username, password);
}

/**
 * A user `alice` (made by the admin) who owns an MCP instance of the server at `mcpUrl`, and an API
 * key of hers for it: an app's grant on that one instance.
 */
export async function aliceWithInstanceKey(baseUrl: string, adminPassword: string, mcpUrl: string, name: string) {
  const admin = await new Api(baseUrl).login('admin', adminPassword);
  const alice = await userApi(baseUrl, admin, 'alice', 'user');
  const made = await alice.post('/svc/v1/mcps', { name, url: mcpUrl });
  if (made.status !== 201) throw new Error(`add the MCP instance: ${made.status} ${made.text}`);
  const instance = made.body.instance.id as string;
  const created = await alice.post('/svc/v1/keys', { name: `${name} key`, mcp_servers: [{ url: mcpUrl, instance_ids: [instance] }] });
  if (created.status !== 201) throw new Error(`make the key: ${created.status} ${created.text}`);
  return { alice, instance, key: created.body.key as string, grant: created.body.access_request_id as string };
}

export const expectErrorShape = (body: any) =>
  typeof body?.error?.message === 'string' && typeof body?.error?.type === 'string' && typeof body?.error?.code === 'string';

export function createBody(overrides: Record<string, unknown> = {}) {
  return {
    app_client_id: 'demo-app',
    flow_type: 'popup',
    requested_role: 'scope_user_power_user',
    requested: { version: '1', mcp_servers: [] as { url: string }[] },
    ...overrides,
  };
}
