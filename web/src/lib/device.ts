/**
 * A person's name for the device behind a session, from its User-Agent ("Firefox 133 ·
 * Windows"), for the account page's session list: the raw string is what the server stores
 * (docs/accounts.md#login-and-sessions) and stays in the row's tooltip.
 *
 * Only the families people recognise, most specific first (Edge and Opera also say "Chrome",
 * Chrome also says "Safari"); anything else (a script, an unknown browser) is shown by its first
 * product token ("curl/8.5.0", "python-httpx/0.28.1"), never a guess.
 */

const BROWSERS: [RegExp, string][] = [
  [/\bEdg(?:e|A|iOS)?\/(\d+)/, 'Edge'],
  [/\b(?:OPR|Opera)\/(\d+)/, 'Opera'],
  [/\b(?:Firefox|FxiOS)\/(\d+)/, 'Firefox'],
  [/\bHeadlessChrome\/(\d+)/, 'Chrome (headless)'],
  [/\b(?:Chrome|CriOS|Chromium)\/(\d+)/, 'Chrome'],
  [/\bVersion\/(\d+)[.\d]* (?:Mobile\/\S+ )?Safari\//, 'Safari'],
]

const SYSTEMS: [RegExp, string][] = [
  [/\b(?:iPhone|iPad|iPod)\b/, 'iOS'],
  [/\bAndroid\b/, 'Android'],
  [/\bCrOS\b/, 'ChromeOS'],
  [/\bWindows\b/, 'Windows'],
  [/\bMac OS X\b|\bMacintosh\b/, 'macOS'],
  [/\bLinux\b/, 'Linux'],
]

export function deviceName(ua: string | null | undefined): string | null {
  if (!ua) return null
  let browser: string | null = null
  for (const [re, name] of BROWSERS) {
    const m = re.exec(ua)
    if (m) {
      browser = `${name} ${m[1]}`
      break
    }
  }
  const system = SYSTEMS.find(([re]) => re.test(ua))?.[1]
  if (browser) return system ? `${browser} · ${system}` : browser
  const first = ua.trim().split(/\s+/)[0]
  return first.length > 60 ? first.slice(0, 60) + '…' : first
}
