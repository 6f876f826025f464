// The ONE shipped editor configuration: the app (Editor.ts) and the parity script
// (web/scripts/parity.mjs, which proves the Python normalizer writes what this editor writes)
// both build Crepe through createCrepe(), so what is tested is what users run. No CSS here:
// the parity script loads this module in Node.
import { EditorView } from '@codemirror/view'
import { Crepe, type CrepeConfig } from '@milkdown/crepe'
import { commandsCtx, editorViewCtx, nodeViewCtx } from '@milkdown/kit/core'
import { codeBlockConfig } from '@milkdown/kit/component/code-block'
import type { Ctx } from '@milkdown/kit/ctx'
import type { Node as ProseNode } from '@milkdown/kit/prose/model'
import type { NodeViewConstructor } from '@milkdown/kit/prose/view'
import { uploadConfig } from '@milkdown/kit/plugin/upload'
import { clearTextInCurrentBlockCommand, codeBlockSchema, setBlockTypeCommand } from '@milkdown/kit/preset/commonmark'

import katex from 'katex'

import { DIAGRAM_LANGUAGE, renderDiagram } from './diagram'
import { FEATURES, type Lang } from './features'
import { imageAltText, internalDocumentHref, internalLinks, keepImageAlt, keepSelectionLaidOut, serializerOptions } from './plugins'

type FeatureConfigs = NonNullable<CrepeConfig['featureConfigs']>
type BlockEditConfig = NonNullable<FeatureConfigs['block-edit']>

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

// a flowchart: three boxes joined by lines (Crepe's icons are inline SVG of this size)
const DIAGRAM_ICON =
  '<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="1.6"><rect x="8" y="3" width="8" height="5" rx="1"/><rect x="3" y="16" width="7" height="5" rx="1"/><rect x="14" y="16" width="7" height="5" rx="1"/><path d="M12 8v4M6.5 16v-4h11v4"/></svg>'

/**
 * The slash-menu item's action that turns the current (empty) block into a code block of this
 * language, with the cursor inside it. Crepe's own *Math* item adds a new block instead and
 * leaves the cursor in whatever block follows, so the next keys went into the next code block.
 */
function codeBlockOf(language: string) {
  return (ctx: Ctx) => {
    const commands = ctx.get(commandsCtx)
    commands.call(clearTextInCurrentBlockCommand.key)
    commands.call(setBlockTypeCommand.key, { nodeType: codeBlockSchema.type(ctx), attrs: { language } })
  }
}

function slashConfig(lang: Lang, diagrams: boolean): FeatureConfigs['block-edit'] {
  const out: Record<string, unknown> = {}
  for (const [groupKey, group] of Object.entries(FEATURES.slash_menu)) {
    const g: Record<string, unknown> = { label: group.label[lang] }
    for (const [key, item] of Object.entries(group.items)) {
      if (key === 'diagram') continue // OpenKB's own item, added below
      g[key] = item.enabled ? { label: item.label[lang] } : null
    }
    out[groupKey] = g
  }
  const diagram = (FEATURES.slash_menu.advancedGroup.items as Record<string, { enabled: boolean; label: Record<Lang, string> }>).diagram
  out.buildMenu = (builder: Parameters<NonNullable<BlockEditConfig['buildMenu']>>[0]) => {
    const advanced = builder.getGroup('advanced')
    const math = advanced.group.items.find((i) => i.key === 'math')
    if (math) math.onRun = codeBlockOf('LaTeX') // Crepe writes a LaTeX block as $$ (docs/markdown.md)
    // *Diagram* makes a ```mermaid block, drawn as it is typed
    if (diagrams && diagram?.enabled) advanced.addItem('diagram', { label: diagram.label[lang], icon: DIAGRAM_ICON, onRun: codeBlockOf(DIAGRAM_LANGUAGE) })
  }
  return out as FeatureConfigs['block-edit']
}

/**
 * A formula block's preview: KaTeX's MathML output, or while the formula is unfinished (as it is
 * typed), KaTeX's message as plain text. Crepe's own preview draws KaTeX's error as a span with a
 * `style="color:…"` attribute, which the CSP refuses (server/web/__init__.py), once per key typed.
 * Registered after Crepe's features, so it wraps their preview and passes other languages on.
 */
function formulaPreview(editor: Crepe['editor']): void {
  editor.config((ctx) => {
    ctx.update(codeBlockConfig.key, (prev) => ({
      ...prev,
      renderPreview: (language, content, apply) => {
        if (language.toLowerCase() !== 'latex' || !content) return prev.renderPreview(language, content, apply)
        try {
          return katex.renderToString(content, { output: 'mathml', displayMode: true, throwOnError: true })
        } catch (error) {
          const p = document.createElement('p')
          p.className = 'formula-error'
          p.textContent = error instanceof Error ? error.message : String(error)
          return p
        }
      },
    }))
  })
}

/**
 * Inline formulas (`$…$`) drawn by KaTeX into the node's span, as Crepe's own node does, except
 * one KaTeX cannot parse: its source is shown as text (the message as its title). Crepe's node
 * drew KaTeX's error span, whose `style="color:…"` attribute the CSP refuses.
 */
function inlineFormulas(editor: Crepe['editor']): void {
  editor.config((ctx) => {
    ctx.update(nodeViewCtx, (views) => [
      ...views,
      [
        'math_inline',
        (node: ProseNode) => {
          const code = String(node.attrs.value ?? '')
          const dom = document.createElement('span')
          dom.dataset.type = 'math_inline' // what Crepe's formula tooltip looks for
          dom.dataset.value = code
          try {
            katex.render(code, dom, { throwOnError: true })
          } catch (error) {
            dom.className = 'formula-error'
            dom.title = error instanceof Error ? error.message : String(error)
            dom.textContent = code
          }
          return { dom }
        },
      ] satisfies [string, NodeViewConstructor],
    ])
  })
}

/**
 * A pasted or dropped image goes in where the cursor is. In an empty top-level line (the usual way:
 * a new line, then paste a screenshot) Milkdown put it below that line and left the cursor above
 * it, so the next words typed went above the picture and the empty line stayed in the page (as
 * `<br />`). The image now goes in before the empty line, and the cursor, still in that line, is
 * below the picture. Lines inside lists and quotes keep the default (a list item must start with
 * its text).
 */
function imagesAboveTheEmptyLine(editor: Crepe['editor']): void {
  editor.config((ctx) => {
    ctx.update(uploadConfig.key, (prev) => ({
      ...prev,
      getInsertPos: (event, ctx2, fallback) => {
        const pos = prev.getInsertPos ? prev.getInsertPos(event, ctx2, fallback) : fallback
        const $pos = ctx2.get(editorViewCtx).state.doc.resolve(pos)
        const line = $pos.parent
        return $pos.depth === 1 && line.type.name === 'paragraph' && line.content.size === 0 ? $pos.before() : pos
      },
    }))
  })
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
      'block-edit': slashConfig(lang, failed !== undefined),
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
      // Formulas: no Crepe setting. A formula block's preview is formulaPreview() above (KaTeX's
      // MathML: its HTML output positions glyphs with style="..." attributes, which the strict
      // CSP refuses) and inline formulas are inlineFormulas() (built with the DOM API's style
      // properties, which the CSP allows); Crepe's latex options only fed the preview it replaced.
    } as FeatureConfigs,
  })
  formulaPreview(crepe.editor)
  inlineFormulas(crepe.editor)
  imagesAboveTheEmptyLine(crepe.editor)
  serializerOptions(crepe.editor)
  keepImageAlt(crepe.editor)
  imageAltText(crepe.editor)
  keepSelectionLaidOut(crepe.editor)
  internalLinks(crepe.editor, opts.resolveLink ?? internalDocumentHref)
  return crepe
}
