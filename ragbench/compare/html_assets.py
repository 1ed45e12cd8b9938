"""The HTML report's inline style sheet and script (no file, font or library is loaded from anywhere)."""

CSS = """
:root{--fg:#1b1f24;--dim:#57606a;--line:#d0d7de;--bg2:#f6f8fa;--good:#1a7f37;--bad:#cf222e;--gold:#9a6700}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0 auto;
 padding:16px 24px;max-width:1600px}
h1{font-size:22px;margin:4px 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:16px 0 6px}
nav a{margin-right:14px}.notes{color:var(--dim);font-size:13px;margin:4px 0 0;padding-left:18px}
table{border-collapse:collapse;font-size:13px;margin:6px 0 10px}
th,td{border-bottom:1px solid var(--line);padding:3px 8px;text-align:left;vertical-align:top}td.run{white-space:nowrap}
th{background:var(--bg2);position:sticky;top:0;white-space:nowrap}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
table.sortable th{cursor:pointer;user-select:none}
th[aria-sort=ascending]::after{content:" ▲"}th[aria-sort=descending]::after{content:" ▼"}
tbody.baselines tr{color:var(--dim);background:#fbfbfb}tbody.baselines tr:first-child td{border-top:2px solid var(--line)}
.better{color:var(--good);font-weight:600}.worse{color:var(--bad);font-weight:600}.same{color:var(--dim)}
.baseline{font-weight:600}
.panels{display:flex;flex-wrap:wrap;gap:12px}.panel{border:1px solid var(--line);border-radius:6px;padding:6px}
svg text{font-size:12px;fill:var(--fg)}svg .dim{fill:var(--dim)}
.controls{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin:8px 0;font-size:13px}
.controls select,.controls input{font-size:13px;padding:2px 4px}#dd-dyn label{margin-right:10px}
#dd-list tr.q{cursor:pointer}#dd-list tr.q:hover{background:#eef4ff}
.mark{display:inline-block;width:11px;height:11px;margin-right:1px;border-radius:2px;background:#ccc}
.mark.y{background:var(--good)}.mark.n{background:var(--bad)}
.detail{background:#fcfcfd;border:1px solid var(--line);border-radius:6px;padding:8px 12px}
.cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:14px}
.gold{color:var(--gold);font-weight:700}.ev{background:#fff8c5;padding:2px 4px;border-radius:3px}
.answer{background:var(--bg2);padding:4px 6px;border-radius:4px;white-space:pre-wrap}
pre{white-space:pre-wrap;font-size:12px;margin:2px 0 6px;max-height:240px;overflow:auto}
details>summary{cursor:pointer}.small{font-size:12px;color:var(--dim)}
.err{color:var(--bad)}
"""

JS = r"""
(function(){
'use strict';
function num(v){var x=parseFloat(v);return isNaN(x)?null:x;}
document.querySelectorAll('table.sortable').forEach(function(tb){
  tb.querySelectorAll('th').forEach(function(th,col){
    th.addEventListener('click',function(){
      var asc=th.getAttribute('aria-sort')!=='ascending';
      tb.querySelectorAll('th').forEach(function(o){o.removeAttribute('aria-sort');});
      th.setAttribute('aria-sort',asc?'ascending':'descending');
      tb.querySelectorAll('tbody').forEach(function(body){
        var rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(a,b){
          var x=a.cells[col].getAttribute('data-v'),y=b.cells[col].getAttribute('data-v');
          var nx=num(x),ny=num(y),c;
          if(nx===null&&ny===null)c=String(x).localeCompare(String(y));
          else if(nx===null)return 1;else if(ny===null)return -1;else c=nx-ny;
          return asc?c:-c;});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
});
var el=document.getElementById('report-data');if(!el)return;
var D=JSON.parse(el.textContent),T=D.drill.texts,L=D.labels,PAGE=100;
var dd=document.getElementById('drilldown');if(!dd)return;
function h(tag,attrs,kids){var e=document.createElement(tag);
  for(var k in attrs||{}){if(k==='text')e.textContent=attrs[k];else e.setAttribute(k,attrs[k]);}
  (kids||[]).forEach(function(c){if(c!=null)e.appendChild(typeof c==='string'?document.createTextNode(c):c);});
  return e;}
function sel(id,label,opts){var s=h('select',{id:id});
  opts.forEach(function(o){s.appendChild(h('option',{value:o[0],text:o[1]}));});
  return h('label',{},[label+' ',s]);}
var dsNames=Object.keys(D.drill.datasets);if(!dsNames.length)return;
var ctl=h('div',{'class':'controls'});dd.appendChild(ctl);
var state={ds:dsNames[0],shown:PAGE,open:null};
ctl.appendChild(sel('dd-ds','dataset',dsNames.map(function(d){return [d,d];})));
ctl.appendChild(h('span',{id:'dd-dyn'}));
ctl.appendChild(h('label',{},['search ',h('input',{id:'dd-q',type:'search',placeholder:'question or id'})]));
var count=h('span',{'class':'small',id:'dd-count'});ctl.appendChild(count);
var table=h('table',{id:'dd-list'});dd.appendChild(table);
var more=h('button',{id:'dd-more',text:'show more'});dd.appendChild(more);
var CATS=['not_retrieved','ranked_below_k','lost_by_expansion','answered_wrong','answered_right','failed','no_gold_evidence'];
function setup(){
  var X=D.drill.datasets[state.ds],runs=X.runs,types={};
  X.questions.forEach(function(q){types[q.t]=1;});
  var dyn=document.getElementById('dd-dyn');dyn.textContent='';
  var ro=runs.map(function(r){return [r,L[r]||r];});
  dyn.appendChild(sel('dd-type','type',[['','all']].concat(Object.keys(types).sort().map(function(t){return [t,t];}))));
  dyn.appendChild(sel('dd-a','run A',ro));
  dyn.appendChild(sel('dd-b','run B',ro));
  dyn.appendChild(sel('dd-vs','A vs B',[['','all questions'],['ab','A right, B wrong'],['ba','A wrong, B right'],
    ['yy','both right'],['nn','both wrong']]));
  dyn.appendChild(sel('dd-cat','verdict of A',[['','any']].concat(CATS.map(function(c){return [c,c.replace(/_/g,' ')];}))));
  if(runs.length>1)document.getElementById('dd-b').value=runs[1];
  ['dd-type','dd-a','dd-b','dd-vs','dd-cat'].forEach(function(i){
    document.getElementById(i).addEventListener('change',function(){state.shown=PAGE;render();});});
  render();
}
function val(id){var e=document.getElementById(id);return e?e.value:'';}
function filtered(){
  var X=D.drill.datasets[state.ds],a=val('dd-a'),b=val('dd-b'),ty=val('dd-type'),vs=val('dd-vs'),
      cat=val('dd-cat'),q=val('dd-q').toLowerCase(),out=[];
  var A=X.cases[a]||[],B=X.cases[b]||[];
  X.questions.forEach(function(qq,i){
    if(ty&&qq.t!==ty)return;
    var ca=A[i],cb=B[i];
    if(cat&&!(ca&&ca.c===cat))return;
    if(vs){if(!ca||!cb)return;var ra=ca.r===true,rb=cb.r===true;
      if(vs==='ab'&&!(ra&&!rb))return;if(vs==='ba'&&!(!ra&&rb))return;
      if(vs==='yy'&&!(ra&&rb))return;if(vs==='nn'&&!(!ra&&!rb))return;}
    if(q&&String(qq.text||'').toLowerCase().indexOf(q)<0&&qq.q.toLowerCase().indexOf(q)<0)return;
    out.push(i);});
  return out;
}
function fmt(x){return x==null?'-':(Math.round(x*1000)/1000).toString();}
function scoreName(X,r){return (X.cases[r]||[]).some(function(c){return c&&c.s['judge/accuracy']!=null;})?
  'judge accuracy':'F1';}
function mainScore(c){if(!c)return null;var s=c.s;return s['judge/accuracy']!=null?s['judge/accuracy']:s['answer/f1'];}
function render(){
  var X=D.drill.datasets[state.ds],a=val('dd-a'),b=val('dd-b'),idx=filtered();
  table.textContent='';
  table.appendChild(h('thead',{},[h('tr',{},[h('th',{text:'id'}),h('th',{text:'type'}),h('th',{text:'question'}),
    h('th',{'class':'n',text:'A: '+(L[a]||a)+' ('+scoreName(X,a)+')'}),
    h('th',{'class':'n',text:'B: '+(L[b]||b)+' ('+scoreName(X,b)+')'}),
    h('th',{text:'right (■) per run'})])]));
  var body=h('tbody');table.appendChild(body);
  idx.slice(0,state.shown).forEach(function(i){
    var q=X.questions[i],ca=(X.cases[a]||[])[i],cb=(X.cases[b]||[])[i];
    var marks=h('td');X.runs.forEach(function(r){var c=X.cases[r][i];
      marks.appendChild(h('span',{'class':'mark'+(c&&c.r===true?' y':c&&c.r===false?' n':''),title:(L[r]||r)}));});
    var tr=h('tr',{'class':'q','data-i':String(i)},[h('td',{text:q.q}),h('td',{text:q.t}),
      h('td',{text:String(q.text||'(no cases.jsonl record)').slice(0,140)}),
      h('td',{'class':'n',text:fmt(mainScore(ca))}),h('td',{'class':'n',text:fmt(mainScore(cb))}),marks]);
    tr.addEventListener('click',function(){state.open=state.open===i?null:i;render();});
    body.appendChild(tr);
    if(state.open===i)body.appendChild(h('tr',{},[h('td',{colspan:'6'},[detail(X,i,[a,b])])]));
  });
  count.textContent=idx.length+' of '+X.questions.length+' questions';
  more.style.display=idx.length>state.shown?'':'none';
}
function detail(X,i,runs){
  var q=X.questions[i],box=h('div',{'class':'detail'});
  box.appendChild(h('div',{},[h('b',{text:'Question: '}),String(q.text||'')]));
  box.appendChild(h('div',{},[h('b',{text:'Gold answer: '}),q.gold.join(' | ')||'(none)']));
  if(q.ev.length){var ev=h('div',{},[h('b',{text:'Gold evidence:'})]);
    q.ev.forEach(function(t){ev.appendChild(h('div',{'class':'ev',text:T[t]}));});box.appendChild(ev);}
  var cols=h('div',{'class':'cols'});box.appendChild(cols);
  runs.filter(function(r,j){return runs.indexOf(r)===j;}).forEach(function(r){
    var c=X.cases[r][i],col=h('div',{'class':'run'});cols.appendChild(col);
    col.appendChild(h('h3',{text:L[r]||r}));
    if(!c){col.appendChild(h('div',{'class':'small',text:'this run has no case for this question'}));return;}
    if(c.e)col.appendChild(h('div',{'class':'err',text:c.e}));
    col.appendChild(h('div',{},[h('b',{text:'Answer: '}),h('span',{'class':'answer',text:c.a==null?'(none)':String(c.a)})]));
    col.appendChild(h('div',{'class':'small',text:'verdict: '+String(c.c||'').replace(/_/g,' ')+
      '; scores: '+Object.keys(c.s).map(function(k){return k+' '+fmt(c.s[k]);}).join(', ')}));
    if(c.rp){var rp=h('details',{'class':'spread'},[h('summary',{text:'spread over '+c.rp.n+' repeats ('+c.rp.r+
      '): '+Object.keys(c.rp.s).map(function(k){var v=c.rp.s[k];return k+' '+fmt(v[0])+'\u2013'+fmt(v[1])+
      ' (sd '+fmt(v[2])+')';}).join(', ')})]);
      c.rp.a.forEach(function(t,j){rp.appendChild(h('div',{'class':'small',text:'repeat '+(j+1)+': '+T[t]}));});
      col.appendChild(rp);}
    var hits=h('ol',{'class':'hits'});
    c.h.forEach(function(x,j){var li=h('li',{},[h('span',{'class':x[2]?'gold':'',
      text:(x[2]?'★ gold ':'')+x[0]+(x[1]?' (doc '+x[1]+')':'')+(j>=c.k?' [below top-k]':'')})]);
      if(x[3]>=0)li.appendChild(h('details',{},[h('summary',{text:'text'}),h('pre',{text:T[x[3]]})]));
      hits.appendChild(li);});
    col.appendChild(h('div',{},[h('b',{text:'Hits (ranked; ★ = covers gold evidence):'}),hits]));
    var ctx=h('div',{},[h('b',{text:'Context the generator read:'})]);
    c.x.forEach(function(x){ctx.appendChild(h('details',{},[h('summary',{'class':x[2]?'gold':'',
      text:(x[2]?'★ holds evidence: ':'')+(x[1]||'context')}),h('pre',{text:T[x[0]]})]));});
    col.appendChild(ctx);
    var jn=Object.keys(c.j).filter(function(n){var v=c.j[n];return v&&(typeof v!=='object'||Object.keys(v).length);});
    if(jn.length){var jd=h('div',{},[h('b',{text:'Judges:'})]);
      jn.forEach(function(name){var v=c.j[name],lines=typeof v==='object'&&v?Object.keys(v).map(function(k){
        return k+': '+(typeof v[k]==='string'?v[k]:JSON.stringify(v[k]));}).join('\n'):String(v);
        jd.appendChild(h('div',{},[h('i',{text:name}),h('pre',{text:lines})]));});col.appendChild(jd);}
  });
  return box;
}
document.getElementById('dd-ds').addEventListener('change',function(e){state.ds=e.target.value;state.open=null;
  state.shown=PAGE;setup();});
document.getElementById('dd-q').addEventListener('input',function(){state.shown=PAGE;render();});
more.addEventListener('click',function(){state.shown+=PAGE;render();});
setup();
})();
"""
