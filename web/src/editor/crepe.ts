// The ONE shipped editor configuration: the app (Editor.ts) and the parity script
// (web/scripts/parity.mjs, which proves the Python normalizer writes what this editor writes)
// both build Crepe through createCrepe(), so what is tested is what users run. No CSS here:
// the parity script loads this module in Node.
import { EditorView } from '@codemirror/view'
import { Crepe, type CrepeConfig } from '@milkdown/crepe'

import { DIAGRAM_LANGUAGE, renderDiagram } from './diagram'
import { FEATURES, type Lang } from './features'
import { internalDocumentHref, internalLinks, keepImageAlt, serializerOptions } from './plugins'

type FeatureConfigs = NonNullable<CrepeConfig['featureConfigs']>

export interface CrepeOptions {
  root: HTMLElement
  defaultValue?: string
  lang?: Lang
  /** Upload a pasted/dropped/chosen file; resolves to its stored reference (`asset://<id>`). */
  onUpload?: (file: File) => Promise<string>
  /** The URL an image `src` loads from (asset:// -> the permission-checked asset route). */
  resolveAsset?: (src: string) => string
  /** The app URL of a link href, or null to leave it alone (openkb://document/<id>). */
  resolveLink?: (href: string) => string | null
  /** Text shown in an empty document. */
  placeholder?: string
  /**
   * The page's CSP style nonce (server/web/__init__.py): CodeMirror (code blocks) injects a
   * <style> element, which the CSP refuses without it. Absent in the parity script (no CSP).
   */
  cspNonce?: string
  /**
   * Draw ```mermaid blocks as diagrams (./diagram.ts), with this text before the reason when a
   * block is not a valid diagram. Absent in the parity script: drawing needs a browser.
   */
  diagramFailed?: string
}

function toolbarConfig(lang: Lang): FeatureConfigs['toolbar'] {
  const t = FEATURES.toolbar
  const label = (k: string) => t[k]?.label[lang]
  return {
    boldLabel: label('bold'),
    italicLabel: label('italic'),
    strikethroughLabel: label('strikethrough'),
    codeLabel: label('code'),
    latexLabel: label('latex'),
    linkLabel: label('link'),
    buildToolbar: (builder) => {
      for (const group of builder.build()) {
        const g = builder.getGroup(group.key).group
        const kept = g.items.filter((item) => t[item.key]?.enabled !== false)
        g.items.splice(0, g.items.length, ...kept)
      }
    },
  }
}

function slashConfig(lang: Lang): FeatureConfigs['block-edit'] {
  const out: Record<string, unknown> = {}
  for (const [groupKey, group] of Object.entries(FEATURES.slash_menu)) {
    const g: Record<string, unknown> = { label: group.label[lang] }
    for (const [key, item] of Object.entries(group.items)) {
      g[key] = item.enabled ? { label: item.label[lang] } : null
    }
    out[groupKey] = g
  }
  return out as FeatureConfigs['block-edit']
}

export function createCrepe(opts: CrepeOptions): Crepe {
  const lang = opts.lang ?? 'en'
  const proxy = opts.resolveAsset
  const failed = opts.diagramFailed
  const imageBlock: FeatureConfigs['image-block'] = {}
  if (opts.onUpload) imageBlock.onUpload = opts.onUpload
  if (proxy) imageBlock.proxyDomURL = (url: string) => proxy(url)
  const crepe = new Crepe({
    root: opts.root,
    defaultValue: opts.defaultValue ?? '',
    features: FEATURES.crepe_features as CrepeConfig['features'],
    featureConfigs: {
      'image-block': imageBlock,
      placeholder: { text: opts.placeholder ?? '' },
      toolbar: toolbarConfig(lang),
      'block-edit': slashConfig(lang),
      'code-mirror': {
        ...(opts.cspNonce ? { extensions: [EditorView.cspNonce.of(opts.cspNonce)] } : {}),
        ...(failed === undefined
          ? {}
          : {
              // undefined: drawn later (async), null: no preview for other languages
              renderPreview: (language: string, content: string, apply: (value: null | string | HTMLElement) => void) =>
                language.toLowerCase() === DIAGRAM_LANGUAGE && content.trim() ? renderDiagram(content, apply, failed) : null,
            }),
      },
      // A formula block's preview reaches the page as an HTML string (innerHTML); KaTeX's HTML
      // output positions glyphs with style="..." attributes, which the strict CSP refuses
      // (server/web/__init__.py). Its MathML output has none and every current browser lays it
      // out. Inline formulas are built with the DOM API (style properties), which the CSP allows.
      latex: { katexOptions: { output: 'mathml' } },
    } as FeatureConfigs,
  })
  serializerOptions(crepe.editor)
  keepImageAlt(crepe.editor)
  internalLinks(crepe.editor, opts.resolveLink ?? internalDocumentHref)
  return crepe
}
