import{r as e,t}from"./chunk-QB3YPZ4I-DYhxrSQy.js";import"./chunk-TU62E6Q5-BB3xRkYA.js";import"./diagram-BOCSoyz8.js";import"./chunk-HFQBQIA3-CNSjjTWl.js";import"./chunk-LEVMRMFU-QkMZ5G-3.js";import"./chunk-AXFCVDMN-CHEoPUhl.js";import"./chunk-X4PVCEUW-DXNEdY9O.js";import"./chunk-STOXU5M4-FHOdRqKO.js";import"./chunk-R3KSYZAL-C-ETBd-e.js";import"./chunk-6MUBBAK2-Dl0L-2bo.js";import"./chunk-BG4553SI-D_T6fdOh.js";import"./d3-selection-BD4snsQe.js";import{n}from"./chunk-Y2CYZVJY-DsF7k-Jl.js";var r=t({styles:n(t=>`${e(t)}
  .swimlane.cluster:not([data-color-id]) rect {
    stroke: ${t.clusterBorder} !important;
  }
  [data-look="neo"].cluster rect {
    filter: none;
  }
`,`getStyles`)});export{r as diagram};