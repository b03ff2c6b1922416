/**
 * Redirect URIs a client that describes itself (RFC 7591 registration, a client ID metadata
 * document) may and may not name. The bad ones run or read something on the person's machine, or
 * send the code to another host in the clear.
 */
export const BAD_REDIRECTS = [
  'http://evil.example/cb',
  'http://192.168.1.5/cb',
  'ms-msdt:/id PCWDiagnostic',
  'view-source:https://app.example/cb',
  'jar:https://app.example/a.jar!/cb',
  'filesystem:https://app.example/temporary/cb',
  'javascript:alert(1)',
  'data:text/html,x',
  'file:///etc/passwd',
  'myapp:/cb',
  'https://user:pw@app.example/cb',
  // what the URL parser would drop or keep unseen: the URI checked would not be the one shown
  'https://app.example/c\tb',
  'https://app.example/cb\r\n',
  'https://app.example/\u202ebc',
  'http://127.0.0.1:4000/c b',
];

export const GOOD_REDIRECTS = ['https://app.example/cb', 'http://127.0.0.1:4000/cb', 'http://[::1]:4000/cb', 'http://localhost:4000/cb', 'com.example.app:/oauth/cb'];
