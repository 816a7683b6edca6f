// The agentflow-env trajectory viewer: reads the page's embedded #data JSON (no fetch, works from file://).
(function(){
'use strict';
var D=JSON.parse(document.getElementById('data').textContent);
var EPS=D.episodes,state={f:'all',trial:'',q:'',key:null};
var PREVIEW=600;
function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;if(text!==undefined&&text!==null)e.textContent=String(text);return e}
function pct(x){return (100*x).toFixed(1)}
function solved(ep){return ep.score>=1}
function scoreBadge(ep){var c=ep.score>=1?'ok':(ep.score>0?'mid':'bad');return el('span','badge '+c,ep.score>=1?'solved':(ep.score>0?ep.score.toFixed(2):'failed'))}
function longText(text,pre){
 var box=el('div');var t=String(text);var node=el(pre===false?'div':'pre');box.appendChild(node);
 if(t.length<=PREVIEW){node.textContent=t;return box}
 node.textContent=t.slice(0,PREVIEW)+' \u2026';var b=el('button','more','show all ('+t.length+' characters)');
 b.addEventListener('click',function(){var open=b.getAttribute('data-open')==='1';node.textContent=open?t.slice(0,PREVIEW)+' \u2026':t;
  b.setAttribute('data-open',open?'0':'1');b.textContent=open?'show all ('+t.length+' characters)':'show less'});
 box.appendChild(b);return box}
function row(parent,k,v,cls){if(v===undefined||v===null||v==='')return;var r=el('div','row');r.appendChild(el('div','k',k));
 var c=el('div','v'+(cls?' '+cls:''));if(v instanceof Node){c.appendChild(v)}else{c.appendChild(longText(v))}r.appendChild(c);parent.appendChild(r)}
document.getElementById('title').textContent=D.run+' \u00b7 '+D.label+' ('+D.category+')';
var meta=document.getElementById('meta');
meta.appendChild(document.createTextNode('protocol '+D.protocol+' \u00b7 policy '+D.policy+' \u00b7 '+EPS.length+' episodes \u00b7 accuracy '+
 (EPS.length?pct(EPS.filter(solved).length/EPS.length)+'% solved':'\u2013')+(D.scoring?' \u00b7 scored by '+D.scoring:'')+' \u00b7 '));
var back=el('a',null,'back to the leaderboard');back.href=D.board;meta.appendChild(back);
if(D.note){meta.appendChild(document.createTextNode(' \u00b7 '+D.note))}
var trials={};EPS.forEach(function(e){trials[e.seed]=1});var tsel=document.getElementById('trial');var tk=Object.keys(trials);
if(tk.length<2){tsel.style.display='none'}else{tsel.appendChild(new Option('all trials',''));tk.forEach(function(s){tsel.appendChild(new Option('trial seed '+s,s))})}
function visible(){var q=state.q.toLowerCase();return EPS.filter(function(e){
 if(state.f==='solved'&&!solved(e))return false;if(state.f==='failed'&&solved(e))return false;
 if(state.trial!==''&&String(e.seed)!==state.trial)return false;
 if(q&&(e.question+'\n'+e.answer+'\n'+e.gold).toLowerCase().indexOf(q)<0)return false;return true})}
function drawList(){var list=document.getElementById('list');list.textContent='';var v=visible();
 document.getElementById('count').textContent=v.length+' of '+EPS.length+' shown';
 v.forEach(function(e){var d=el('div','ep'+(e.key===state.key?' sel':''));d.setAttribute('data-key',e.key);d.appendChild(scoreBadge(e));
  var t=el('div');t.appendChild(el('div','n','#'+e.index+(tk.length>1?' \u00b7 seed '+e.seed:'')+(e.sample?' \u00b7 sample '+e.sample:'')+' \u00b7 '+e.turns+(e.turns===1?' turn':' turns')));
  t.appendChild(el('div','q',e.question||e.task_id));d.appendChild(t);d.addEventListener('click',function(){show(e.key)});list.appendChild(d)});
 if(!v.length){list.appendChild(el('p','muted','  no episodes match'))}}
function show(key){var ep=EPS.filter(function(e){return e.key===key})[0];if(!ep)return;state.key=key;
 try{history.replaceState(null,'','#ep='+encodeURIComponent(key))}catch(err){}
 Array.prototype.forEach.call(document.querySelectorAll('#list .ep'),function(d){d.classList.toggle('sel',d.getAttribute('data-key')===key)});
 var det=document.getElementById('detail');det.textContent='';det.appendChild(el('h2',null,'Episode #'+ep.index+' \u00b7 '+ep.task_id));
 var f=el('dl','facts');function fact(k,v){if(v===undefined||v===null||v==='')return;f.appendChild(el('dt',null,k));f.appendChild(el('dd',null,v))}
 fact('question',ep.question);fact('gold answer',ep.gold);fact('trial seed / sample',ep.seed+' / '+ep.sample);
 fact('turns',ep.turns+(ep.truncated?' (turn budget or time ran out)':''));fact('wall time',ep.wall_s+' s');
 if(ep.tokens){fact('planner tokens','prompt '+ep.tokens.prompt+' + completion '+ep.tokens.completion)}
 if(ep.error){fact('scoring error',ep.error)}det.appendChild(f);
 if(ep.missing){det.appendChild(el('p','err',ep.missing))}
 (ep.steps||[]).forEach(function(s){var box=el('div','turn');var h=el('h3');h.appendChild(el('span',null,'Turn '+s.turn));
  if(s.tool)h.appendChild(el('span',null,'tool '+s.tool));if(s.verifier){var vv=el('span','verdict '+s.verifier,'verifier: '+s.verifier);h.appendChild(vv)}
  if(s.seconds!==undefined&&s.seconds!==null)h.appendChild(el('span','muted',Number(s.seconds).toFixed(3)+' s'));box.appendChild(h);
  row(box,'planner action',s.action);row(box,'sub-goal',s.sub_goal);row(box,'context',s.context);row(box,'tool asked for',s.tool_name);
  row(box,'tool command',s.command);row(box,'tool result',s.result);row(box,'verifier verdict',s.verifier);row(box,'final answer',s.final_answer);
  row(box,'error',s.error,'err');(s.extra||[]).forEach(function(kv){row(box,kv[0],kv[1])});det.appendChild(box)});
 var fin=el('div','final '+(solved(ep)?'ok':'bad'));var ff=el('dl','facts');ff.style.margin='0';
 function f2(k,v){ff.appendChild(el('dt',null,k));ff.appendChild(el('dd',null,v))}
 f2('final answer',ep.answer===''?'(none)':ep.answer);f2('gold answer',ep.gold===''?'(none: the scorer checks the answer itself)':ep.gold);f2('score',ep.score+(solved(ep)?' (solved)':' (failed)'));fin.appendChild(ff);det.appendChild(fin);
 if(ep.calls&&ep.calls.length){var dc=el('details','calls');dc.appendChild(el('summary',null,'module calls ('+ep.calls.length+'): every LLM and tool call of the episode'));
  ep.calls.forEach(function(c){var b=el('div','call');b.appendChild(el('div','h',c.module+(c.tool?' \u00b7 '+c.tool:'')+' \u00b7 step '+c.step+(c.usage?' \u00b7 tokens '+c.usage:'')+(c.seconds!==undefined?' \u00b7 '+c.seconds+' s':'')));
   if(c.error)b.appendChild(el('div','err',c.error));b.appendChild(el('div','muted','reply'));b.appendChild(longText(c.reply));
   if(c.prompt){b.appendChild(el('div','muted','prompt'));b.appendChild(longText(c.prompt))}dc.appendChild(b)});det.appendChild(dc)}
 if(ep.calls_left_out){det.appendChild(el('p','muted',ep.calls_left_out+' module calls left out of this page to keep it small; the run\'s trajectories.jsonl has them'))}
 det.scrollTop=0}
Array.prototype.forEach.call(document.querySelectorAll('#bar button'),function(b){b.addEventListener('click',function(){state.f=b.getAttribute('data-f');
 Array.prototype.forEach.call(document.querySelectorAll('#bar button'),function(x){x.classList.toggle('on',x===b)});drawList()})});
tsel.addEventListener('change',function(){state.trial=tsel.value;drawList()});
document.getElementById('search').addEventListener('input',function(ev){state.q=ev.target.value;drawList()});
document.addEventListener('keydown',function(ev){if(ev.target.tagName==='INPUT')return;if(ev.key!=='j'&&ev.key!=='k')return;var v=visible();if(!v.length)return;
 var i=v.findIndex(function(e){return e.key===state.key});i=ev.key==='j'?Math.min(i+1,v.length-1):Math.max(i-1,0);show(v[i].key);
 var s=document.querySelector('#list .ep.sel');if(s)s.scrollIntoView({block:'nearest'})});
drawList();
var m=/^#ep=(.+)$/.exec(location.hash);if(m){show(decodeURIComponent(m[1]))}
})();
