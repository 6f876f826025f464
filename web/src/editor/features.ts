// The editor side of the ONE feature registry, openkb/markdown/features.json (docs/markdown.md
// #feature-registry). The Python dialect reads the same file (openkb/markdown/registry.py), and
// tests/markdown/test_parity.py proves both serialize alike: never hard-code a Crepe feature,
// serializer option or menu entry here; edit the JSON and regenerate the parity corpus.
import registry from '../../../openkb/markdown/features.json'

export type Lang = 'en' | 'zh-CN'
export type Labels = Record<Lang, string>

export interface MenuEntry {
  enabled: boolean
  label: Labels
}

export interface MenuGroup {
  label: Labels
  items: Record<string, MenuEntry>
}

export interface Registry {
  editor: { package: string; version: string; prosemirror_model: string }
  crepe_features: Record<string, boolean>
  serializer: Record<string, unknown>
  openkb_plugins: Record<string, boolean>
  toolbar: Record<string, MenuEntry>
  slash_menu: Record<string, MenuGroup>
  features: { key: string; enabled: boolean; requires?: string[] }[]
}

/** Keys starting with `$` are comments in the JSON. */
function strip<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !k.startsWith('$')))
}

const raw = registry as unknown as Registry

export const FEATURES: Registry = {
  ...raw,
  crepe_features: strip(raw.crepe_features),
  serializer: strip(raw.serializer),
  openkb_plugins: strip(raw.openkb_plugins),
  toolbar: strip(raw.toolbar),
  slash_menu: Object.fromEntries(
    Object.entries(strip(raw.slash_menu)).map(([k, g]) => [k, { ...g, items: strip(g.items) }]),
  ),
}

export function pluginOn(name: string): boolean {
  return FEATURES.openkb_plugins[name] === true
}
