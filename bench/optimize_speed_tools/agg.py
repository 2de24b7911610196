import sys, re, collections
# perf script output: inclusive share per function (a sample counts once per distinct frame)
incl=collections.Counter(); total=0; stack=[]
def flush():
    global total
    if not stack: return
    total+=1
    seen=set()
    for f in stack:
        if f not in seen: seen.add(f); incl[f]+=1
for line in sys.stdin:
    if not line.strip():
        flush(); stack=[]; continue
    if line[0] in ' \t':
        parts=line.strip().split(' ',1)
        if len(parts)==2:
            name=re.sub(r'\+0x[0-9a-f]+.*$','',parts[1]); name=re.sub(r' \(.*\)$','',name)
            name=re.sub(r'::h[0-9a-f]{16}$','',name)
            stack.append(name)
flush()
pat=sys.argv[1] if len(sys.argv)>1 else None
for f,c in incl.most_common(400):
    if pat and not re.search(pat,f): continue
    print(f"{100*c/total:6.1f}%  {f[:150]}")
print("samples",total)
